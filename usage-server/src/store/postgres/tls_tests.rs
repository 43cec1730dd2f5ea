//! The store's TLS against PostgreSQL instances of the tests' own: `initdb` into a temporary
//! directory (as the user `postgres` when the tests run as root: initdb refuses root), a
//! server certificate for `localhost` signed by a CA made here (rcgen; a version 1 one by
//! the `openssl` command), a free port on 127.0.0.1, stopped when the test ends (on panic
//! too). The local test database's configuration is left alone. They fail, never skip,
//! when PostgreSQL's binaries are missing (`/usr/lib/postgresql/*/bin`, or the directory
//! `USAGE_TEST_PG_BIN` names) or `openssl` is.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;

use super::{PgStore, StoreError};
use crate::store::CacheConfig;

/// The certificates of the tests: the CAs as PEM files in a directory of their own, the
/// server's as PEM text.
struct Certs {
    /// The directory holding the CA files.
    dir: tempfile::TempDir,
    /// The server's certificate, for `localhost` only.
    server_cert: String,
    /// The server certificate's key.
    server_key: String,
}

impl Certs {
    /// A CA (`ca.pem`), an unrelated one (`other-ca.pem`), and a server certificate for
    /// `localhost` (not for 127.0.0.1) signed by the first.
    fn make() -> Certs {
        let ca = |name: &str| {
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name.push(DnType::CommonName, name);
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
        };
        let (ours, other) = (ca("usage test CA"), ca("an unrelated CA"));
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, "localhost");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = p.signed_by(&key, &ours).unwrap();

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ours.pem()).unwrap();
        std::fs::write(dir.path().join("other-ca.pem"), other.pem()).unwrap();
        Certs {
            dir,
            server_cert: server.pem(),
            server_key: key.serialize_pem(),
        }
    }

    /// The path of one of the CA files, as a query string value.
    fn ca(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }
}

/// The directory of PostgreSQL's server binaries: `USAGE_TEST_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` with an `initdb`.
fn pg_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("USAGE_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "these tests need PostgreSQL's server binaries (initdb, pg_ctl) in \
             /usr/lib/postgresql/*/bin or in USAGE_TEST_PG_BIN (bash .ci/postgres installs them)"
        )
    })
}

/// A throwaway PostgreSQL instance on 127.0.0.1; stopped and removed when dropped.
struct Instance {
    /// The server binaries.
    bin: PathBuf,
    /// Holds the data directory, the socket and the log; removed after the stop.
    dir: tempfile::TempDir,
    /// Its TCP port on 127.0.0.1.
    port: u16,
}

impl Instance {
    /// Initializes and starts an instance: trust authentication by the `pg_hba.conf` lines
    /// `hba` (one `TYPE` for `127.0.0.1/32`, e.g. `hostssl`), TLS with the server
    /// certificate and key `server` (PEM) when given, and the settings `conf` besides.
    fn start(server: Option<(&str, &str)>, conf: &str, hba: &[&str]) -> Instance {
        let bin = pg_bin();
        let dir = tempfile::tempdir().unwrap();
        // initdb refuses root: as root, the instance runs as `postgres`.
        let as_root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        if as_root {
            run(
                Command::new("chown").arg("postgres:").arg(dir.path()),
                "chown",
            );
        }
        let data = dir.path().join("data");
        let mut instance = Instance { bin, dir, port: 0 };
        instance.pg("initdb", |c| {
            c.arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ])
        });
        // A free port: the kernel's pick, given back at once.
        instance.port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\n\
             fsync = off\nmax_connections = 40\nshared_buffers = 16MB\nssl = {}\n{conf}\n",
            instance.port,
            instance.dir.path().display(),
            if server.is_some() { "on" } else { "off" }
        );
        if let Some((server_cert, server_key)) = server {
            let (cert, key) = (data.join("server.crt"), data.join("server.key"));
            std::fs::write(&cert, server_cert).unwrap();
            std::fs::write(&key, server_key).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            if as_root {
                run(
                    Command::new("chown").arg("postgres:").arg(&cert).arg(&key),
                    "chown",
                );
            }
            conf.push_str(&format!(
                "ssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                cert.display(),
                key.display()
            ));
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(&mut file, conf.as_bytes()).unwrap();
        let hba: String = hba
            .iter()
            .map(|kind| format!("{kind} all all 127.0.0.1/32 trust\n"))
            .collect();
        std::fs::write(
            data.join("pg_hba.conf"),
            format!("local all all trust\n{hba}"),
        )
        .unwrap();
        let log = instance.dir.path().join("log");
        let started = instance.try_pg("pg_ctl", |c| {
            c.arg("-D")
                .arg(&data)
                .args(["-w", "-t", "60", "-l"])
                .arg(&log)
                .arg("start")
        });
        if let Err(e) = started {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the test's PostgreSQL did not start: {e}\n{log}");
        }
        instance
    }

    /// The store URL of the instance's database `postgres` at `host`, with `query`.
    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }

    /// Runs the server binary `name` with the arguments `args` adds, as `postgres` when
    /// root; panics when it fails.
    fn pg(&self, name: &str, args: impl FnOnce(&mut Command) -> &mut Command) {
        if let Err(e) = self.try_pg(name, args) {
            panic!("{e}");
        }
    }

    /// [`Instance::pg`], its failure returned.
    fn try_pg(
        &self,
        name: &str,
        args: impl FnOnce(&mut Command) -> &mut Command,
    ) -> Result<(), String> {
        let program = self.bin.join(name);
        let mut c = if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        // The server's own working directory: root's may not be readable by postgres.
        c.current_dir(self.dir.path());
        args(&mut c);
        let out = c
            .output()
            .map_err(|e| format!("{} cannot run: {e}", program.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{name} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self.try_pg("pg_ctl", |c| {
            c.arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"])
        });
    }
}

/// Runs a command of the setup; panics when it fails.
fn run(c: &mut Command, what: &str) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what} cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Opens the store at `url`; panics with the error when it does not open.
async fn open(url: &str) -> PgStore {
    PgStore::open(url)
        .await
        .unwrap_or_else(|e| panic!("{url} did not open: {e}"))
}

#[tokio::test]
async fn an_unknown_sslmode_fails_the_open_naming_sslmode() {
    let err = open_err("postgres://postgres@127.0.0.1:1/test?sslmode=verify_full").await;
    assert_eq!(
        err,
        "PostgreSQL URL: invalid sslmode value \"verify_full\": use one of disable, prefer, \
         require, verify-ca, verify-full"
    );
}

/// The error of opening the store at `url`, which must be [`StoreError::Unavailable`].
async fn open_err(url: &str) -> String {
    match PgStore::open(url).await {
        Ok(_) => panic!("{url} opened"),
        Err(StoreError::Unavailable(e)) => {
            eprintln!("{url}: {e}");
            e
        }
        Err(e) => panic!("{url}: {e:?}, not Unavailable"),
    }
}

/// Whether a connection of the store's pool is encrypted, as the server sees it.
async fn encrypted(store: &PgStore) -> bool {
    tls_version(store).await.is_some()
}

/// The TLS version of a connection of the store's pool (`TLSv1.3`), as the server sees
/// it; `None` when it is plain.
async fn tls_version(store: &PgStore) -> Option<String> {
    let c = store.pool.get().await.unwrap();
    c.query_one(
        "SELECT CASE WHEN ssl THEN version END FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn the_store_connects_over_tls_and_checks_the_certificate_as_each_sslmode_says() {
    let certs = Certs::make();
    // Only TLS connections are let in.
    let server = Some((certs.server_cert.as_str(), certs.server_key.as_str()));
    let pg = Instance::start(server, "", &["hostssl"]);
    let (ca, other_ca) = (certs.ca("ca.pem"), certs.ca("other-ca.pem"));

    // require: TLS, the certificate unchecked (it is for localhost, not 127.0.0.1).
    let s = open(&pg.url("127.0.0.1", "sslmode=require")).await;
    assert_eq!(tls_version(&s).await.as_deref(), Some("TLSv1.3"));
    // prefer (the default, and written): TLS as the server offers it.
    for query in ["", "sslmode=prefer"] {
        assert!(encrypted(&open(&pg.url("127.0.0.1", query)).await).await);
    }

    // verify-full with the CA and the name the certificate holds.
    let s = open(&pg.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    assert!(encrypted(&s).await);

    // verify-full with an unrelated CA: the certificate does not chain to it.
    let url = pg.url(
        "localhost",
        &format!("hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={other_ca}"),
    );
    let err = open_err(&url).await;
    assert!(
        err.contains("error performing TLS handshake: invalid peer certificate: UnknownIssuer")
            && err.ends_with(&format!("(sslmode=verify-full, sslrootcert={other_ca})")),
        "{err}"
    );
    // So does require with that CA as sslrootcert (libpq's verify-ca then).
    let err = open_err(&pg.url(
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={other_ca}"),
    ))
    .await;
    assert!(
        err.contains("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );

    // verify-full at 127.0.0.1, a name the certificate lacks: the name fails...
    let err = open_err(&pg.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    assert!(
        err.contains(
            "invalid peer certificate: certificate not valid for name \"127.0.0.1\"; \
             certificate is only valid for DnsName(\"localhost\")"
        ),
        "{err}"
    );
    // ... and verify-ca, which checks the chain and not the name, opens; so does require
    // with the right CA.
    for query in [
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        format!("sslmode=require&sslrootcert={ca}"),
    ] {
        assert!(encrypted(&open(&pg.url("127.0.0.1", &query)).await).await);
    }
    // verify-ca with the unrelated CA fails on the chain all the same.
    let err = open_err(&pg.url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={other_ca}"),
    ))
    .await;
    assert!(
        err.contains("invalid peer certificate: UnknownIssuer"),
        "{err}"
    );

    // disable: the server lets no plain connection in.
    let err = open_err(&pg.url("127.0.0.1", "sslmode=disable")).await;
    assert!(
        err.contains(
            "no pg_hba.conf entry for host \"127.0.0.1\", user \"postgres\", database \
             \"postgres\", no encryption"
        ),
        "{err}"
    );

    // A Unix socket speaks no TLS, and sslmode does not apply there, as in libpq.
    let socket = pg.dir.path().display().to_string().replace('/', "%2F");
    for query in [
        String::new(),
        "sslmode=require".to_string(),
        format!("sslmode=verify-full&sslrootcert={ca}"),
    ] {
        let url = format!("postgres://postgres@{socket}:{}/postgres?{query}", pg.port);
        assert!(!encrypted(&open(&url).await).await);
    }

    // The cache's listener connects as the pool does: over TLS, checked.
    let cache = CacheConfig {
        bytes: 1 << 20,
        wait_for_load: false,
    };
    let url = pg.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let s = PgStore::open_with(&url, cache)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let c = s.pool.get().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let listener_ssl: Vec<bool> = loop {
        let rows = c
            .query(
                "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
                 WHERE a.query LIKE 'LISTEN %'",
                &[],
            )
            .await
            .unwrap();
        if !rows.is_empty() || Instant::now() > deadline {
            break rows.iter().map(|r| r.get(0)).collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(listener_ssl, [true], "the listener's connection");
}

#[tokio::test]
async fn prefer_falls_back_to_plain_and_require_fails_on_a_server_without_tls() {
    let certs = Certs::make();
    let pg = Instance::start(None, "", &["host"]);
    // Without sslmode, as store URLs were written before TLS: plain.
    for query in ["", "sslmode=prefer", "sslmode=disable"] {
        assert!(!encrypted(&open(&pg.url("127.0.0.1", query)).await).await);
    }
    for query in [
        "sslmode=require".to_string(),
        format!("sslmode=verify-full&sslrootcert={}", certs.ca("ca.pem")),
    ] {
        let err = open_err(&pg.url("localhost", &query)).await;
        assert!(
            err.contains("error performing TLS handshake: server does not support TLS"),
            "{err}"
        );
    }
}

/// A self-signed X.509 version 1 certificate for `localhost` and its RSA key, made in
/// `dir` by `openssl x509 -req` without extensions, as PEM texts: what Citus makes for
/// itself (`citus-auto-ssl`) and many a hand-made server certificate is.
fn version_1_certificate(dir: &std::path::Path) -> (String, String) {
    let (key, csr, crt) = (dir.join("v1.key"), dir.join("v1.csr"), dir.join("v1.crt"));
    run(
        Command::new("openssl")
            .args(["req", "-new", "-newkey", "rsa:2048", "-nodes"])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&csr),
        "openssl req",
    );
    run(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "30", "-in"])
            .arg(&csr)
            .arg("-signkey")
            .arg(&key)
            .arg("-out")
            .arg(&crt),
        "openssl x509",
    );
    let pem = std::fs::read_to_string(&crt).unwrap();
    let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let cert = <x509_cert::Certificate as x509_cert::der::Decode>::from_der(&der).unwrap();
    assert_eq!(
        cert.tbs_certificate.version,
        x509_cert::Version::V1,
        "openssl made no version 1 certificate"
    );
    (pem, std::fs::read_to_string(&key).unwrap())
}

/// A server certificate of X.509 version 1 (which webpki does not read) is taken where no
/// certificate is checked, over TLS 1.2 and 1.3 (the handshake's signature checked on its
/// RSA key all the same); checking it fails and says why.
#[tokio::test]
async fn require_takes_a_version_1_certificate_over_tls_1_2_and_1_3() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = version_1_certificate(dir.path());
    let root = dir.path().join("v1.crt").display().to_string();
    for version in ["TLSv1.2", "TLSv1.3"] {
        let conf = format!("ssl_max_protocol_version = '{version}'");
        let pg = Instance::start(Some((&cert, &key)), &conf, &["hostssl"]);
        for query in ["sslmode=require", ""] {
            let s = open(&pg.url("localhost", query)).await;
            assert_eq!(tls_version(&s).await.as_deref(), Some(version), "{query}");
        }
        let err = open_err(&pg.url(
            "localhost",
            &format!("sslmode=verify-ca&sslrootcert={root}"),
        ))
        .await;
        assert!(err.contains("UnsupportedCertVersion"), "{err}");
    }
}

/// The local test database opens with a URL without `sslmode` (prefer), as before the
/// store spoke TLS: encrypted when the server has TLS on (Debian's cluster does, with its
/// snake-oil certificate), plain otherwise; and plain with `disable`.
#[tokio::test]
async fn prefer_opens_the_store_on_the_local_test_database() {
    let schema = super::tests::Schema::new("tls").await;
    let url = schema.url();
    assert!(!url.contains("sslmode"));
    let s = open(&url).await;
    let c = s.pool.get().await.unwrap();
    let ssl: String = c.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    assert_eq!(encrypted(&s).await, ssl == "on");
    let s = open(&format!("{url}&sslmode=disable")).await;
    assert!(!encrypted(&s).await);
}
