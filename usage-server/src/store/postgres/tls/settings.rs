//! The TLS settings of a store URL: `sslmode` and `sslrootcert` read as libpq reads them,
//! and the mode tokio-postgres is given.

use std::fmt;
use std::path::PathBuf;

use percent_encoding::percent_decode_str;

/// The `sslmode` of a store URL, with libpq's meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, plain otherwise; no certificate is checked.
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is checked only with `sslrootcert` (then as
    /// [`SslMode::VerifyCa`]).
    Require,
    /// TLS; the server's certificate must chain to a root certificate.
    VerifyCa,
    /// As [`SslMode::VerifyCa`], and the certificate must name the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Every mode with its name in a URL, in libpq's order.
    const ALL: [(&'static str, SslMode); 5] = [
        ("disable", SslMode::Disable),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ];

    /// The mode's name in a URL.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The mode named `value`.
    ///
    /// # Errors
    /// An unknown name: the message names `sslmode` and the values allowed.
    pub fn parse(value: &str) -> Result<SslMode, String> {
        SslMode::ALL
            .iter()
            .find(|(n, _)| *n == value)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                let allowed: Vec<&str> = SslMode::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "invalid sslmode value {value:?}: use one of {}",
                    allowed.join(", ")
                )
            })
    }
}

/// Where the root certificates come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more certificates.
    File(PathBuf),
    /// The OS's certificate store (`sslrootcert=system`).
    System,
}

impl fmt::Display for RootCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootCert::File(p) => write!(f, "{}", p.display()),
            RootCert::System => f.write_str("system"),
        }
    }
}

/// What a store URL says about TLS: its `sslmode` and `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tls {
    /// `sslmode`: `prefer` when the URL has none (`verify-full` with `sslrootcert=system`).
    pub mode: SslMode,
    /// `sslrootcert`, when the URL gives one (an empty value gives none, as in libpq).
    pub root_cert: Option<RootCert>,
}

impl fmt::Display for Tls {
    /// `sslmode=…` and, when given, `, sslrootcert=…`: the settings an error was met with.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sslmode={}", self.mode.name())?;
        if let Some(r) = &self.root_cert {
            write!(f, ", sslrootcert={r}")?;
        }
        Ok(())
    }
}

/// Takes `sslmode` and `sslrootcert` out of the query string of a `postgres://` or
/// `postgresql://` URL: the URL for tokio-postgres (every other option kept as written) and
/// the TLS settings. A string in another form (`host=… dbname=…`) is left whole, with
/// `None`: tokio-postgres reads its `sslmode` itself.
///
/// # Errors
/// An `sslmode` libpq does not know, a part of the query string that does not decode, or
/// `sslrootcert=system` with a mode weaker than `verify-full` (refused by libpq 16 too).
pub fn split_url(url: &str) -> Result<(String, Option<Tls>), String> {
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        return Ok((url.to_string(), None));
    }
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), Some(Tls::default())));
    };
    let mut kept = Vec::new();
    let (mut mode, mut root) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key)?.as_str() {
            "sslmode" => mode = Some(SslMode::parse(&decode(value)?)?),
            "sslrootcert" => {
                root = match decode(value)?.as_str() {
                    "" => None,
                    "system" => Some(RootCert::System),
                    path => Some(RootCert::File(PathBuf::from(path))),
                };
            }
            _ => kept.push(pair),
        }
    }
    let system = root == Some(RootCert::System);
    let mode = match mode {
        Some(m) if system && m != SslMode::VerifyFull => {
            return Err(format!(
                "weak sslmode {:?} may not be used with sslrootcert=system (use \"verify-full\")",
                m.name()
            ));
        }
        Some(m) => m,
        None if system => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((
        rest,
        Some(Tls {
            mode,
            root_cert: root,
        }),
    ))
}

/// A percent-encoded part of a query string, decoded.
fn decode(s: &str) -> Result<String, String> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|d| d.into_owned())
        .map_err(|e| format!("the URL's query string does not decode ({s:?}): {e}"))
}

/// How much of the server's certificate a mode checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing (the handshake's signatures are still checked).
    Nothing,
    /// The chain to the roots, not the name.
    Chain,
    /// The chain and the host name.
    ChainAndName,
}

impl Tls {
    /// The settings tokio-postgres reads from a connection string's own `sslmode`
    /// (`disable`, `prefer` or `require`, no roots): for strings that are not URLs.
    pub fn of_config(cfg: &tokio_postgres::Config) -> Tls {
        use tokio_postgres::config::SslMode as Pg;
        let mode = match cfg.get_ssl_mode() {
            Pg::Disable => SslMode::Disable,
            Pg::Require => SslMode::Require,
            _ => SslMode::Prefer,
        };
        Tls {
            mode,
            root_cert: None,
        }
    }

    /// Sets the mode of tokio-postgres's `cfg` ([`Tls::pg_mode`]), or `disable` when every
    /// host is a Unix socket: PostgreSQL has no TLS there, and libpq ignores `sslmode`.
    pub fn apply(&self, cfg: &mut tokio_postgres::Config) {
        let unix_only = cfg.get_hostaddrs().is_empty()
            && !cfg.get_hosts().is_empty()
            && cfg
                .get_hosts()
                .iter()
                .all(|h| !matches!(h, tokio_postgres::config::Host::Tcp(_)));
        cfg.ssl_mode(if unix_only {
            tokio_postgres::config::SslMode::Disable
        } else {
            self.pg_mode()
        });
    }

    /// The mode to set on tokio-postgres's config: it sends the TLS request (or not) and
    /// falls back to plain for `prefer`; the connector does the checking.
    pub fn pg_mode(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Pg;
        match self.mode {
            SslMode::Disable => Pg::Disable,
            SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        }
    }

    /// Whether the server's certificate is checked (the connection then fails when it
    /// does not pass).
    pub fn verifies(&self) -> bool {
        self.check() != Check::Nothing
    }

    /// What the mode checks.
    pub(super) fn check(&self) -> Check {
        match (self.mode, &self.root_cert) {
            (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => Check::Nothing,
            (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => Check::Chain,
            (SslMode::VerifyFull, _) => Check::ChainAndName,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL for tokio-postgres and the settings of `url`.
    fn split(url: &str) -> (String, Tls) {
        let (rest, tls) = split_url(url).unwrap();
        (rest, tls.expect("a URL"))
    }

    #[test]
    fn every_sslmode_is_read_and_removed() {
        for (name, mode) in SslMode::ALL {
            let (rest, tls) = split(&format!("postgres://u@h:5/db?sslmode={name}"));
            assert_eq!(rest, "postgres://u@h:5/db");
            assert_eq!(
                tls,
                Tls {
                    mode,
                    root_cert: None
                }
            );
            assert_eq!(mode.name(), name);
        }
    }

    #[test]
    fn prefer_is_the_default_and_a_url_without_options_is_left_alone() {
        for url in [
            "postgres://u@h:5/db",
            "postgresql://u@h/db?",
            "postgres://u@h:5/db?options=-csearch_path%3Dx",
        ] {
            let (rest, tls) = split(url);
            assert_eq!(rest, url.trim_end_matches('?'));
            assert_eq!(tls, Tls::default());
            assert_eq!(tls.mode, SslMode::Prefer);
            assert_eq!(tls.pg_mode(), tokio_postgres::config::SslMode::Prefer);
        }
    }

    #[test]
    fn sslrootcert_is_read_and_removed_and_other_options_kept_as_written() {
        let (rest, tls) = split(
            "postgres://u@h:5/db?options=-csearch_path%3Dx&sslrootcert=%2Ftmp%2Fmy%20ca.pem\
             &sslmode=verify-full&application_name=a%26b",
        );
        assert_eq!(
            rest,
            "postgres://u@h:5/db?options=-csearch_path%3Dx&application_name=a%26b"
        );
        assert_eq!(
            tls,
            Tls {
                mode: SslMode::VerifyFull,
                root_cert: Some(RootCert::File("/tmp/my ca.pem".into())),
            }
        );
        assert_eq!(
            tls.to_string(),
            "sslmode=verify-full, sslrootcert=/tmp/my ca.pem"
        );
        // What is left is a URL tokio-postgres takes, with its options as they were.
        let cfg: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(cfg.get_options(), Some("-csearch_path=x"));
        assert_eq!(cfg.get_application_name(), Some("a&b"));
        // An empty sslrootcert is none, as in libpq.
        assert_eq!(split("postgres://h/db?sslrootcert=").1, Tls::default());
    }

    #[test]
    fn the_mode_given_to_tokio_postgres_and_what_is_checked() {
        use tokio_postgres::config::SslMode as Pg;
        let root = Some(RootCert::File("ca.pem".into()));
        let cases = [
            (SslMode::Disable, None, Pg::Disable, Check::Nothing),
            (SslMode::Prefer, None, Pg::Prefer, Check::Nothing),
            (SslMode::Prefer, root.clone(), Pg::Prefer, Check::Nothing),
            (SslMode::Require, None, Pg::Require, Check::Nothing),
            (SslMode::Require, root.clone(), Pg::Require, Check::Chain),
            (SslMode::VerifyCa, None, Pg::Require, Check::Chain),
            (SslMode::VerifyFull, root, Pg::Require, Check::ChainAndName),
        ];
        for (mode, root_cert, pg, check) in cases {
            let tls = Tls { mode, root_cert };
            assert_eq!((tls.pg_mode(), tls.check()), (pg, check), "{tls}");
        }
    }

    #[test]
    fn sslmode_is_ignored_on_unix_sockets_as_in_libpq() {
        use tokio_postgres::config::SslMode as Pg;
        let require = Tls {
            mode: SslMode::Require,
            root_cert: None,
        };
        for (url, pg) in [
            ("postgres://u@%2Frun%2Fpostgresql/db", Pg::Disable),
            ("postgres://u@/db?host=/run/postgresql", Pg::Disable),
            ("postgres://u@h/db", Pg::Require),
            ("postgres://u@h,%2Frun%2Fpostgresql/db", Pg::Require),
            ("postgres://u@h/db?hostaddr=127.0.0.1", Pg::Require),
        ] {
            let mut cfg: tokio_postgres::Config = url.parse().unwrap();
            require.apply(&mut cfg);
            assert_eq!(cfg.get_ssl_mode(), pg, "{url}");
        }
    }

    #[test]
    fn an_unknown_sslmode_names_sslmode_and_the_values_allowed() {
        for url in [
            "postgres://h/db?sslmode=verify_full",
            "postgres://h/db?sslmode=allow",
            "postgres://h/db?sslmode=",
        ] {
            let err = split_url(url).unwrap_err();
            assert!(
                err.starts_with("invalid sslmode value \"")
                    && err
                        .ends_with(": use one of disable, prefer, require, verify-ca, verify-full"),
                "{err}"
            );
        }
    }

    #[test]
    fn sslrootcert_system_makes_verify_full_the_default_and_refuses_weaker_modes() {
        let (rest, tls) = split("postgres://h/db?sslrootcert=system");
        assert_eq!(rest, "postgres://h/db");
        assert_eq!(
            tls,
            Tls {
                mode: SslMode::VerifyFull,
                root_cert: Some(RootCert::System)
            }
        );
        assert_eq!(
            split("postgres://h/db?sslrootcert=system&sslmode=verify-full").1,
            tls
        );
        assert_eq!(
            split_url("postgres://h/db?sslrootcert=system&sslmode=verify-ca").unwrap_err(),
            "weak sslmode \"verify-ca\" may not be used with sslrootcert=system \
             (use \"verify-full\")"
        );
    }

    #[test]
    fn a_connection_string_that_is_not_a_url_is_left_to_tokio_postgres() {
        let s = "host=h dbname=db sslmode=require";
        assert_eq!(split_url(s).unwrap(), (s.to_string(), None));
        let cfg: tokio_postgres::Config = s.parse().unwrap();
        assert_eq!(Tls::of_config(&cfg).mode, SslMode::Require);
    }

    #[test]
    fn a_query_string_that_does_not_decode_is_an_error() {
        let err = split_url("postgres://h/db?sslrootcert=%FF").unwrap_err();
        assert!(
            err.starts_with("the URL's query string does not decode"),
            "{err}"
        );
    }
}
