//! Enumerations with wire identifiers, and values as sent that may not be known.

use std::fmt;

/// An enumeration whose values travel as identifiers (`QUERY_AGGREGATION_SUM`, `editor`).
pub trait WireEnum: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// Every value, in the spec's order.
    const ALL: &'static [Self];
    /// What the enumeration is called in messages ("aggregation function").
    const WHAT: &'static str;

    /// The wire identifier.
    fn identifier(self) -> &'static str;

    /// The value with this identifier (exact, case-sensitive).
    fn from_identifier(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.identifier() == s)
    }

    /// The allowed identifiers, comma-separated, for messages.
    fn allowed() -> String {
        Self::ALL
            .iter()
            .map(|v| v.identifier())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Defines a [`WireEnum`] with its identifiers, serde impls, `Display` and `FromStr`.
macro_rules! wire_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vm:meta])* $var:ident = $id:literal ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name { $( $(#[$vm])* $var ),+ }

        impl $crate::ident::WireEnum for $name {
            const ALL: &'static [Self] = &[$(Self::$var),+];
            const WHAT: &'static str = $what;
            fn identifier(self) -> &'static str {
                match self { $(Self::$var => $id),+ }
            }
        }

        impl $name {
            /// Every identifier, in the spec's order.
            pub const IDENTIFIERS: &'static [&'static str] = &[$($id),+];

            /// The wire identifier of this value.
            pub fn as_str(self) -> &'static str {
                <Self as $crate::ident::WireEnum>::identifier(self)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::ident::UnknownIdentifier;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <Self as $crate::ident::WireEnum>::from_identifier(s).ok_or_else(|| {
                    $crate::ident::UnknownIdentifier::new::<Self>(s)
                })
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use wire_enum;

/// An identifier that is not one of an enumeration's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{given}` (allowed: {allowed})")]
pub struct UnknownIdentifier {
    what: &'static str,
    given: String,
    allowed: String,
}

impl UnknownIdentifier {
    /// The error for `given`, listing the identifiers of `T`.
    pub fn new<T: WireEnum>(given: &str) -> UnknownIdentifier {
        UnknownIdentifier {
            what: T::WHAT,
            given: given.to_string(),
            allowed: T::allowed(),
        }
    }
}

/// An enumeration value as sent: a known value, or an identifier this version does not
/// know. Requests keep unknown identifiers so that the validator can report them with
/// their path; responses keep them so that a client never fails on a new value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ident<T> {
    /// A known value.
    Known(T),
    /// An identifier that is not one of `T`'s.
    Unknown(String),
}

impl<T: WireEnum> Ident<T> {
    /// The known value, if it is one.
    pub fn known(&self) -> Option<T> {
        match self {
            Ident::Known(t) => Some(*t),
            Ident::Unknown(_) => None,
        }
    }

    /// The identifier as sent.
    pub fn as_str(&self) -> &str {
        match self {
            Ident::Known(t) => t.identifier(),
            Ident::Unknown(s) => s,
        }
    }

    /// Resolves an identifier.
    pub fn parse(s: &str) -> Ident<T> {
        match T::from_identifier(s) {
            Some(t) => Ident::Known(t),
            None => Ident::Unknown(s.to_string()),
        }
    }
}

impl<T> From<T> for Ident<T> {
    fn from(t: T) -> Self {
        Ident::Known(t)
    }
}

impl<T: WireEnum> fmt::Display for Ident<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<T: WireEnum> serde::Serialize for Ident<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de, T: WireEnum> serde::Deserialize<'de> for Ident<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Ident::parse(&s))
    }
}
