//! The two certificate verifiers rustls lacks: one that checks no certificate (but still the
//! handshake's signatures), for `prefer` and `require`, and one that checks the chain but not
//! the host name, for `verify-ca`. `verify-full` is webpki's own.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

/// The verifier of `prefer`, and of `require` without `sslrootcert`: any certificate is
/// accepted (as by libpq, which checks none there), of any X.509 version. The handshake's
/// signature is still checked against the certificate's key, with the provider's
/// algorithms: else a man in the middle could show the server's own certificate without
/// its key, and channel binding (SCRAM-SHA-256-PLUS, which hashes that certificate) would
/// not see it.
#[derive(Debug)]
pub(super) struct NoCheck(pub(super) WebPkiSupportedAlgorithms);

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
pub(super) struct ChainOnly(pub(super) Arc<WebPkiServerVerifier>);

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
