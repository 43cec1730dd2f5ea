//! The visitors of [`scan`](super::scan): each mirrors a step of `Cx`, so that a body's
//! kind errors are found in one pass over its bytes, without a tree.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};

use super::{Kind, ObjectSpec, display, expected, is_camel};
use crate::error::{JsonPath, Rule, Violation, Violations};

/// What to do with a value of each JSON kind; `got` is the kind as `kind_name` names
/// it. [`Any`] makes it a visitor that every JSON value reaches through
/// `deserialize_any`.
trait OnValue<'de>: Sized {
    type Out;
    fn scalar<E: Error>(self, got: &'static str) -> Result<Self::Out, E>;
    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Out, A::Error>;
    fn map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Out, A::Error>;
}

struct Any<'de, T>(T, PhantomData<&'de ()>);

fn any<'de, D: Deserializer<'de>, T: OnValue<'de>>(d: D, t: T) -> Result<T::Out, D::Error> {
    d.deserialize_any(Any(t, PhantomData))
}

impl<'de, T: OnValue<'de>> Visitor<'de> for Any<'de, T> {
    type Value = T::Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: Error>(self, _: bool) -> Result<T::Out, E> {
        self.0.scalar("a boolean")
    }
    fn visit_i64<E: Error>(self, _: i64) -> Result<T::Out, E> {
        self.0.scalar("a number")
    }
    fn visit_u64<E: Error>(self, _: u64) -> Result<T::Out, E> {
        self.0.scalar("a number")
    }
    fn visit_f64<E: Error>(self, _: f64) -> Result<T::Out, E> {
        self.0.scalar("a number")
    }
    fn visit_str<E: Error>(self, _: &str) -> Result<T::Out, E> {
        self.0.scalar("a string")
    }
    fn visit_unit<E: Error>(self) -> Result<T::Out, E> {
        self.0.scalar("null")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T::Out, A::Error> {
        self.0.seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T::Out, A::Error> {
        self.0.map(map)
    }
}

/// A value read and dropped (through `deserialize_any`, so its strings are validated
/// as when they are kept).
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        any(d, self)
    }
}

impl<'de> OnValue<'de> for Skip {
    type Out = ();

    fn scalar<E: Error>(self, _: &'static str) -> Result<(), E> {
        Ok(())
    }
    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }
    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

/// The body's top level: `None` for an object (scanned), else the kind it is.
pub(super) struct Top<'a> {
    pub(super) spec: &'static ObjectSpec,
    pub(super) out: &'a mut Violations,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        any(d, self)
    }
}

impl<'de> OnValue<'de> for Top<'_> {
    type Out = Option<&'static str>;

    fn scalar<E: Error>(self, got: &'static str) -> Result<Self::Out, E> {
        Ok(Some(got))
    }
    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Out, A::Error> {
        Skip.seq(seq).map(|()| Some("an array"))
    }
    fn map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Out, A::Error> {
        object(map, self.spec, &JsonPath::root(), self.out).map(|()| None)
    }
}

/// `Cx::object`: each known field's value checked against its kind; a repeated key
/// counts with its last value; the snake_case spelling's errors before the camelCase
/// one's. Unknown fields are validation, not kinds: their values are only read.
fn object<'de, A: MapAccess<'de>>(
    mut map: A,
    spec: &'static ObjectSpec,
    at: &JsonPath,
    out: &mut Violations,
) -> Result<(), A::Error> {
    // The errors of each field's value, snake_case spelling then camelCase.
    let mut found: Vec<Option<Violations>> = vec![None; 2 * spec.fields.len()];
    while let Some(key) = map.next_key_seed(Key)? {
        let field = spec
            .fields
            .iter()
            .position(|f| f.name == key || is_camel(f.name, &key));
        let Some(i) = field else {
            map.next_value_seed(Skip)?;
            continue;
        };
        let f = &spec.fields[i];
        let mut errors = Violations::new();
        map.next_value_seed(Value {
            kind: &f.kind,
            path: at.key(f.name, i as u32),
            element: false,
            out: &mut errors,
        })?;
        found[2 * i + usize::from(key != f.name)] = Some(errors);
    }
    for errors in found.into_iter().flatten() {
        out.append(errors);
    }
    Ok(())
}

/// An object key.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Key {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: Error>(self, s: &str) -> Result<String, E> {
        Ok(s.to_string())
    }
}

/// A value checked against its kind: `Cx::value`, or for an array element (`element`)
/// the element step of its array case, where `null` is an error too.
struct Value<'a> {
    kind: &'static Kind,
    path: JsonPath,
    element: bool,
    out: &'a mut Violations,
}

impl<'de> DeserializeSeed<'de> for Value<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        any(d, self)
    }
}

impl Value<'_> {
    /// The kind error of this value (its message built only when it is kept).
    fn wrong(self, got: &str) {
        if self.out.would_keep(&self.path) {
            let want = match self.kind {
                Kind::Marker(_) if got != "null" => "a JSON object (`{}`)",
                other => expected(other),
            };
            let msg = format!("`{}` must be {want}, not {got}", display(&self.path));
            self.out
                .push(Violation::new(self.path, Rule::InvalidValue, msg));
        } else {
            self.out.count();
        }
    }
}

impl<'de> OnValue<'de> for Value<'_> {
    type Out = ();

    fn scalar<E: Error>(self, got: &'static str) -> Result<(), E> {
        let fits = match (self.kind, got) {
            (_, "null") => !self.element,
            (Kind::Text | Kind::TextKeepEmpty, "a string") => true,
            (Kind::Bool, "a boolean") => true,
            (Kind::Int, "a number" | "a string") => true,
            _ => false,
        };
        if !fits {
            self.wrong(got);
        }
        Ok(())
    }

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Kind::Array(elem) = self.kind else {
            self.wrong("an array");
            return Skip.seq(seq);
        };
        let mut i = 0;
        loop {
            let element = Value {
                kind: elem,
                path: self.path.index(i),
                element: true,
                out: &mut *self.out,
            };
            if seq.next_element_seed(element)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        match self.kind {
            Kind::Object(spec) | Kind::Marker(spec) => object(map, spec, &self.path, self.out),
            Kind::AnyObject => Skip.map(map),
            _ => {
                self.wrong("an object");
                Skip.map(map)
            }
        }
    }
}
