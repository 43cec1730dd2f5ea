//! Ordering of dotted client versions (contract section 3, Ordering).

use std::cmp::Ordering;

/// Compares two versions: split on `.`, compared part by part; two numeric parts (ASCII
/// digits only) by value, a numeric part before a text part, two text parts bytewise; a
/// prefix comes first (`1.2` < `1.2.0`); versions still equal (`1.02`, `1.2`) are ordered
/// bytewise as whole strings.
///
/// # Example
/// ```
/// use std::cmp::Ordering::Less;
/// use usage_core::version::compare;
/// assert_eq!(compare("1.9.12", "1.10.0"), Less);
/// assert_eq!(compare("1.10.0", "1.10.x"), Less);
/// assert_eq!(compare("1.2", "1.2.0"), Less);
/// ```
pub fn compare(a: &str, b: &str) -> Ordering {
    let mut pa = a.split('.');
    let mut pb = b.split('.');
    loop {
        match (pa.next(), pb.next()) {
            (None, None) => return a.as_bytes().cmp(b.as_bytes()),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = compare_part(x, y);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

fn is_numeric(p: &str) -> bool {
    !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit())
}

fn compare_part(x: &str, y: &str) -> Ordering {
    match (is_numeric(x), is_numeric(y)) {
        (true, true) => {
            let x = x.trim_start_matches('0');
            let y = y.trim_start_matches('0');
            x.len()
                .cmp(&y.len())
                .then_with(|| x.as_bytes().cmp(y.as_bytes()))
        }
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => x.as_bytes().cmp(y.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contract_examples() {
        let mut v = vec![
            "1.10.x", "1.10.0", "1.9.12", "1.2.0", "1.2", "1.02", "a", "1.b", "1.9",
        ];
        v.sort_by(|a, b| compare(a, b));
        assert_eq!(
            v,
            [
                "1.02", "1.2", "1.2.0", "1.9", "1.9.12", "1.10.0", "1.10.x", "1.b", "a"
            ]
        );
    }

    proptest! {
        #[test]
        fn is_a_total_order(a in "[0-9a.]{0,6}", b in "[0-9a.]{0,6}", c in "[0-9a.]{0,6}") {
            prop_assert_eq!(compare(&a, &b), compare(&b, &a).reverse());
            prop_assert_eq!(compare(&a, &b) == Ordering::Equal, a == b);
            if compare(&a, &b) != Ordering::Greater && compare(&b, &c) != Ordering::Greater {
                prop_assert_ne!(compare(&a, &c), Ordering::Greater);
            }
        }
    }
}
