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

mod settings;
mod verify;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;

use settings::Check;
pub use settings::{RootCert, SslMode, Tls, split_url};
use verify::{ChainOnly, NoCheck};

impl Tls {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslrootcert_system_reads_the_os_store() {
        let tls = split_url("postgres://h/db?sslrootcert=system")
            .unwrap()
            .1
            .expect("a URL");
        let roots = tls.roots(None).unwrap_or_else(|e| panic!("{e}"));
        assert!(!roots.is_empty());
        assert!(tls.connector_in(None).is_ok());
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
