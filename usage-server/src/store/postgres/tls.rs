//! TLS from the store to the database, with libpq's `sslmode` and `sslrootcert`.
//!
//! tokio-postgres parses only `sslmode=disable|prefer|require` and refuses the options it
//! does not know, so [`split_url`] takes both out of the store URL, and [`Tls::pg_mode`]
//! and [`Tls::connector`] give tokio-postgres its mode and a rustls connector (the *ring*
//! provider, set in the config itself) that the pool and the columnar cache's listener
//! share. What each mode checks, as in libpq:
//!
//! | `sslmode` | TLS | the chain to the roots | the host name |
//! |---|---|---|---|
//! | `disable` | never | – | – |
//! | `prefer` (the default) | when the server offers it | no | no |
//! | `require` | always | only with `sslrootcert` | no |
//! | `verify-ca` | always | yes | no |
//! | `verify-full` | always | yes | yes |
//!
//! The roots are those of the PEM file `sslrootcert` names, the OS's store with
//! `sslrootcert=system` (which, as in libpq 16, makes `verify-full` the default and refuses
//! weaker modes), or else, for `verify-ca` and `verify-full`, `~/.postgresql/root.crt`.
//! Unlike libpq, `prefer` checks no certificate even with `sslrootcert` (libpq would check
//! it and, when that fails, connect without TLS: no protection either), and a `require`
//! with an `sslrootcert` that cannot be read fails instead of checking nothing.
//!
//! A certificate that is checked is checked by webpki: it must be X.509 version 3 and name
//! the host in its subjectAltName (the common name is not read, as in browsers; libpq
//! falls back to it). Where nothing is checked any certificate is taken, version 1 too
//! (Citus makes one for itself). On a Unix socket there is no TLS and `sslmode` does not
//! apply, as in libpq. Not read: the `PGSSLMODE` and `PGSSLROOTCERT` variables,
//! `sslmode=allow`, client certificates (`sslcert`, `sslkey`) and revocation lists.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;

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
enum Check {
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
    fn check(&self) -> Check {
        match (self.mode, &self.root_cert) {
            (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => Check::Nothing,
            (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => Check::Chain,
            (SslMode::VerifyFull, _) => Check::ChainAndName,
        }
    }

    /// The rustls connector of these settings, the pool's and the listener's; the root
    /// certificates are read now. Without `sslrootcert`, `verify-ca` and `verify-full` read
    /// `~/.postgresql/root.crt`, as libpq does.
    ///
    /// # Errors
    /// Root certificates that cannot be read, or none at all.
    pub fn connector(&self) -> Result<Connector, String> {
        self.connector_in(home_dir().as_deref())
    }

    /// [`Tls::connector`] with `home` as the home directory (the tests' own).
    ///
    /// # Errors
    /// As [`Tls::connector`].
    pub fn connector_in(&self, home: Option<&Path>) -> Result<Connector, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let algorithms = provider.signature_verification_algorithms;
        let verifier: Arc<dyn ServerCertVerifier> = match self.check() {
            Check::Nothing => Arc::new(NoCheck(algorithms)),
            check => {
                let roots = Arc::new(self.roots(home)?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("TLS ({self}): {e}"))?;
                if check == Check::Chain {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                }
            }
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS ({self}): {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // As libpq 17 does: required by servers for sslnegotiation=direct, ignored before.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Connector(MakeRustlsConnect::new(config)))
    }

    /// The root certificates the server's certificate must chain to.
    fn roots(&self, home: Option<&Path>) -> Result<RootCertStore, String> {
        let mut roots = RootCertStore::empty();
        let path = match &self.root_cert {
            Some(RootCert::System) => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
                    return Err(format!(
                        "sslrootcert=system: no usable certificate in the system's store{}",
                        if errors.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", errors.join("; "))
                        }
                    ));
                }
                return Ok(roots);
            }
            Some(RootCert::File(p)) => p.clone(),
            None => {
                let Some(home) = home else {
                    return Err(format!(
                        "sslmode={} needs root certificates and there is no home directory \
                         to find ~/.postgresql/root.crt in: name them with sslrootcert=PATH \
                         (or sslrootcert=system)",
                        self.mode.name()
                    ));
                };
                home.join(".postgresql").join("root.crt")
            }
        };
        if !path.exists() {
            return Err(format!(
                "root certificate file \"{}\" does not exist: sslmode={} checks the server's \
                 certificate; provide the file, name another with sslrootcert=PATH, use the \
                 system's roots with sslrootcert=system, or check no certificate \
                 (sslmode=require without sslrootcert)",
                path.display(),
                self.mode.name()
            ));
        }
        let certs = CertificateDer::pem_file_iter(&path)
            .map_err(|e| format!("root certificate file \"{}\": {e}", path.display()))?;
        for (i, cert) in certs.enumerate() {
            let cert =
                cert.map_err(|e| format!("root certificate file \"{}\": {e}", path.display()))?;
            roots.add(cert).map_err(|e| {
                format!(
                    "root certificate file \"{}\": certificate {} is not a usable root: {e}",
                    path.display(),
                    i + 1
                )
            })?;
        }
        if roots.is_empty() {
            return Err(format!(
                "root certificate file \"{}\" holds no PEM certificate (sslrootcert)",
                path.display()
            ));
        }
        Ok(roots)
    }
}

/// The store's TLS connector, the pool's and the listener's: rustls's for tokio-postgres,
/// which also takes the empty host name tokio-postgres gives it for a Unix socket (where
/// rustls's own refuses the connection, whatever the mode, though no TLS is spoken there).
#[derive(Clone)]
pub struct Connector(MakeRustlsConnect);

impl<S> MakeTlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = <MakeRustlsConnect as MakeTlsConnect<S>>::Stream;
    type TlsConnect = <MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect;
    type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        // Never sent: without a host name tokio-postgres refuses a TLS handshake itself.
        let domain = if domain.is_empty() {
            "localhost"
        } else {
            domain
        };
        MakeTlsConnect::<S>::make_tls_connect(&mut self.0, domain)
    }
}

/// The home directory, where libpq looks for `~/.postgresql/root.crt`: `$HOME`, else the
/// user's entry.
fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(std::env::home_dir)
}

/// The verifier of `prefer`, and of `require` without `sslrootcert`: any certificate is
/// accepted (as by libpq, which checks none there), of any X.509 version. The handshake's
/// signature is still checked against the certificate's key, with the provider's
/// algorithms: else a man in the middle could show the server's own certificate without
/// its key, and channel binding (SCRAM-SHA-256-PLUS, which hashes that certificate) would
/// not see it.
#[derive(Debug)]
struct NoCheck(WebPkiSupportedAlgorithms);

/// The public key (SubjectPublicKeyInfo) of a certificate of any X.509 version: webpki
/// reads only version 3, and servers with a version 1 certificate (what
/// `openssl x509 -req` makes without extensions) are common where nothing is checked.
fn public_key(
    cert: &CertificateDer<'_>,
) -> Result<SubjectPublicKeyInfoDer<'static>, rustls::Error> {
    use x509_cert::der::{Decode, Encode};
    x509_cert::Certificate::from_der(cert)
        .and_then(|c| c.tbs_certificate.subject_public_key_info.to_der())
        .map(SubjectPublicKeyInfoDer::from)
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))
}

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // As rustls's verify_tls12_signature, on the key alone: TLS 1.2's schemes do not
        // name the curve, so each algorithm of the scheme is tried.
        let spki = public_key(cert)?;
        let key = webpki::RawPublicKeyEntity::try_from(&spki)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let algorithms = self
            .0
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map(|(_, a)| *a)
            .ok_or(rustls::Error::PeerMisbehaved(
                rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            ))?;
        if algorithms
            .iter()
            .any(|a| key.verify_signature(*a, message, dss.signature()).is_ok())
        {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::BadSignature,
            ))
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature_with_raw_key(
            message,
            &public_key(cert)?,
            dss,
            &self.0,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The verifier of `verify-ca` (and of `require` with `sslrootcert`): webpki's, less the
/// host name. webpki checks the chain (signatures, validity, purpose) before the name, so
/// a certificate failing only on its name has passed everything else.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
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
    fn sslrootcert_system_reads_the_os_store() {
        let tls = split("postgres://h/db?sslrootcert=system").1;
        let roots = tls.roots(None).unwrap_or_else(|e| panic!("{e}"));
        assert!(!roots.is_empty());
        assert!(tls.connector_in(None).is_ok());
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

    #[test]
    fn verifying_without_sslrootcert_reads_root_crt_of_the_home_directory() {
        let home = tempfile::tempdir().unwrap();
        let tls = Tls {
            mode: SslMode::VerifyCa,
            root_cert: None,
        };
        let missing = home.path().join(".postgresql").join("root.crt");
        let Err(err) = tls.connector_in(Some(home.path())) else {
            panic!("a connector without root certificates");
        };
        assert!(
            err.starts_with(&format!(
                "root certificate file \"{}\" does not exist: sslmode=verify-ca checks",
                missing.display()
            )) && err.contains("sslrootcert=PATH")
                && err.contains("sslrootcert=system"),
            "{err}"
        );
        let Err(err) = tls.connector_in(None) else {
            panic!("a connector without a home directory");
        };
        assert!(err.contains("sslrootcert=PATH"), "{err}");

        // With the file there, it is read (and must hold certificates).
        std::fs::create_dir(home.path().join(".postgresql")).unwrap();
        std::fs::write(&missing, "not a certificate\n").unwrap();
        let Err(err) = tls.connector_in(Some(home.path())) else {
            panic!("a connector without root certificates");
        };
        assert_eq!(
            err,
            format!(
                "root certificate file \"{}\" holds no PEM certificate (sslrootcert)",
                missing.display()
            )
        );
        let ca = rcgen::generate_simple_self_signed(vec!["ca".to_string()]).unwrap();
        std::fs::write(&missing, ca.cert.pem()).unwrap();
        assert!(tls.connector_in(Some(home.path())).is_ok());
        // Modes that check nothing read nothing.
        for mode in [SslMode::Disable, SslMode::Prefer, SslMode::Require] {
            let tls = Tls {
                mode,
                root_cert: None,
            };
            assert!(tls.connector_in(None).is_ok(), "{tls}");
        }
    }

    #[test]
    fn a_missing_sslrootcert_file_is_named() {
        let tls = Tls {
            mode: SslMode::Require,
            root_cert: Some(RootCert::File("/nonexistent/ca.pem".into())),
        };
        let Err(err) = tls.connector_in(None) else {
            panic!("a connector without root certificates");
        };
        assert!(
            err.starts_with(
                "root certificate file \"/nonexistent/ca.pem\" does not exist: \
                 sslmode=require checks"
            ),
            "{err}"
        );
    }
}
