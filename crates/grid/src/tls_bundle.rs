//! TLS for the clients Isthmus ships (`isthmus admin`, `copy`, `region push/pull`, the Python
//! package's remote arrays) when the operator gives a CA bundle: the bundle's certificates are
//! the only roots, verified by webpki as usual, and, as curl does, a self-signed certificate
//! given as the bundle is accepted when the server presents exactly it. OpenSSL marks such a
//! certificate CA:TRUE, which webpki refuses as an end entity (`CaUsedAsEndEntity`); only then,
//! and only for a byte-identical certificate, this module checks the rest itself: the server
//! name against its subjectAltNames and the validity period. Handshake signatures are always
//! checked with the provider's algorithms.

use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, StreamOwned};
use ureq::config::ConfigBuilder;
use ureq::typestate::AgentScope;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, TcpConnector, Transport, TransportAdapter,
};

/// The certificates of a PEM file (other PEM items are skipped).
pub fn load_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate bundle: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// An agent built from `config`; with a bundle, it trusts only the bundle (see the module).
pub fn agent(config: ConfigBuilder<AgentScope>, ca_bundle: Option<&Path>) -> Result<ureq::Agent, String> {
    let Some(path) = ca_bundle else { return Ok(config.build().into()) };
    let tls = client_config(load_bundle(path)?).map_err(|e| format!("{}: {e}", path.display()))?;
    let connector = ().chain(TcpConnector::default()).chain(BundleTls { config: tls });
    Ok(ureq::Agent::with_parts(config.build(), connector, DefaultResolver::default()))
}

/// A rustls client configuration trusting `bundle` as described in the module comment.
pub fn client_config(bundle: Vec<CertificateDer<'static>>) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = BundleVerifier::new(bundle, provider.clone())?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// webpki against the bundle, then a self-signed bundle certificate presented as it is.
#[derive(Debug)]
pub struct BundleVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    bundle: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl BundleVerifier {
    pub fn new(bundle: Vec<CertificateDer<'static>>, provider: Arc<CryptoProvider>) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(bundle.iter().cloned());
        if added == 0 {
            return Err("no usable certificate in the bundle".into());
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { webpki, bundle, provider })
    }

    /// The checks webpki's chain building skipped for a certificate the bundle holds as it is.
    fn verify_pinned(
        &self,
        end_entity: &CertificateDer<'_>,
        name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let (not_before, not_after) =
            validity(end_entity).ok_or(rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let now = now.as_secs() as i64;
        if now < not_before {
            return Err(rustls::Error::InvalidCertificate(CertificateError::NotValidYet));
        }
        if now > not_after {
            return Err(rustls::Error::InvalidCertificate(CertificateError::Expired));
        }
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        cert.verify_is_valid_for_subject_name(name)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::NotValidForName))
    }
}

/// Whether webpki refused the certificate only because it is a CA (self-signed, CA:TRUE).
fn is_ca_used_as_end_entity(err: &rustls::Error) -> bool {
    matches!(err, rustls::Error::InvalidCertificate(CertificateError::Other(other))
        if matches!(other.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity)))
}

impl ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(err)
                if is_ca_used_as_end_entity(&err)
                    && self.bundle.iter().any(|cert| cert.as_ref() == end_entity.as_ref()) =>
            {
                self.verify_pinned(end_entity, server_name, now)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// One DER element of `input`: (tag, contents, the rest).
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (first as usize, rest),
        0x81..=0x84 => {
            let n = (first - 0x80) as usize;
            let bytes = rest.get(..n)?;
            (bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize), &rest[n..])
        }
        _ => return None,
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

/// A certificate's notBefore and notAfter, in Unix seconds.
fn validity(cert: &[u8]) -> Option<(i64, i64)> {
    let (_, certificate, _) = der_element(cert)?;
    let (_, tbs, _) = der_element(certificate)?;
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = der_element(rest)?.2; // [0] version
    }
    for _ in 0..3 {
        rest = der_element(rest)?.2; // serialNumber, signature, issuer
    }
    let (_, validity, _) = der_element(rest)?;
    let (before_tag, before, rest) = der_element(validity)?;
    let (after_tag, after, _) = der_element(rest)?;
    Some((der_time(before_tag, before)?, der_time(after_tag, after)?))
}

/// A UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ) in Unix seconds.
fn der_time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 if text.len() == 12 => {
            let yy: i32 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        0x18 if text.len() == 14 => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let field = |i: usize| rest.get(i..i + 2)?.parse::<u8>().ok();
    let month = time::Month::try_from(field(0)?).ok()?;
    let date = time::Date::from_calendar_date(year, month, field(2)?).ok()?;
    Some(date.with_hms(field(4)?, field(6)?, field(8)?).ok()?.assume_utc().unix_timestamp())
}

/// The TLS layer of a bundle agent's connections (ureq's own, with this module's verifier).
#[derive(Debug)]
struct BundleTls {
    config: Arc<ClientConfig>,
}

impl<In: Transport> Connector<In> for BundleTls {
    type Out = Either<In, BundleTransport>;

    fn connect(&self, details: &ConnectionDetails, chained: Option<In>) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else { return Ok(None) };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details.uri.host().unwrap_or_default();
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let name = ServerName::try_from(host.to_string()).map_err(|_| ureq::Error::Tls("invalid server name"))?;
        let mut conn = ClientConnection::new(self.config.clone(), name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        let buffers = LazyBuffers::new(details.config.input_buffer_size(), details.config.output_buffer_size());
        Ok(Some(Either::B(BundleTransport { buffers, stream: StreamOwned { conn, sock } })))
    }
}

struct BundleTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl fmt::Debug for BundleTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BundleTransport").finish()
    }
}

impl Transport for BundleTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        self.stream.write_all(&self.buffers.output()[..amount])?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let amount = self.stream.read(self.buffers.input_append_buf())?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_times_read_as_unix_seconds() {
        assert_eq!(der_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(der_time(0x17, b"491231235959Z"), Some(2524607999));
        assert_eq!(der_time(0x18, b"20261127050000Z"), Some(1795755600));
        assert_eq!(der_time(0x17, b"7001010000Z"), None);
        assert_eq!(der_time(0x18, b"20261327050000Z"), None);
    }

    /// `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 36500
    /// -subj /CN=host -addext "subjectAltName=IP:127.0.0.1,DNS:host"`, twice: CA:TRUE, the same
    /// subject and names, different keys; notBefore a UTCTime, notAfter a GeneralizedTime.
    const SELF_SIGNED: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBjTCCATKgAwIBAgIUWpm1JLN0RmHjtbYNXOQBDOM48GgwCgYIKoZIzj0EAwIw\n\
DzENMAsGA1UEAwwEaG9zdDAgFw0yNjExMjcwNTE2NDNaGA8yMTI2MTEwMzA1MTY0\n\
M1owDzENMAsGA1UEAwwEaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABG0N\n\
2rF+g2bVKbQsOrVaZfqLd0bpRkPv6oErTQMhU8KxWyuWSMnfLqmJywQ0PPs9bzj8\n\
KicUybTeefJcewH7auqjajBoMB0GA1UdDgQWBBQzYhkPNmF1+IEUYRO4efFhiRvc\n\
tjAfBgNVHSMEGDAWgBQzYhkPNmF1+IEUYRO4efFhiRvctjAPBgNVHRMBAf8EBTAD\n\
AQH/MBUGA1UdEQQOMAyHBH8AAAGCBGhvc3QwCgYIKoZIzj0EAwIDSQAwRgIhAPdb\n\
upjEeLY67C5zDaVfVpoWi1LtDHJP+/ufVepmTuZgAiEAtQ7X3IkFYOV18d6DbWz/\n\
xd+UYqNDiOOKU0cUaiTVyCM=\n\
-----END CERTIFICATE-----";
    const SAME_SUBJECT_OTHER_KEY: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBizCCATKgAwIBAgIUask0kqjqLyoDNUwTMGeWi0wTquMwCgYIKoZIzj0EAwIw\n\
DzENMAsGA1UEAwwEaG9zdDAgFw0yNjExMjcwNTE2NDNaGA8yMTI2MTEwMzA1MTY0\n\
M1owDzENMAsGA1UEAwwEaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABN7M\n\
97VhreB0hJkbkRDvZp9k1N5jtM8ckKGxQYjxgIl6DnfDY/1IlEiBKJdWm3SdFkxj\n\
7ApCcTQAk/f9o9KVl9CjajBoMB0GA1UdDgQWBBQ13I70Oz8CsPmO35roMjLFi4aW\n\
pzAfBgNVHSMEGDAWgBQ13I70Oz8CsPmO35roMjLFi4aWpzAPBgNVHRMBAf8EBTAD\n\
AQH/MBUGA1UdEQQOMAyHBH8AAAGCBGhvc3QwCgYIKoZIzj0EAwIDRwAwRAIfTd/c\n\
NvWBQc5h13AjFDtAVLB4fuhkGi/LsxNmdrJ3BgIhAK2wKzHzMNCsV4oCzp6mzq/S\n\
+d0UO/5cVV5/FyqtBBdu\n\
-----END CERTIFICATE-----";
    const NOT_BEFORE: i64 = 1795756603; // 2026-11-27 05:16:43 UTC
    const NOT_AFTER: i64 = 4949356603; // 2126-11-03 05:16:43 UTC

    fn pem(text: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(text.as_bytes()).unwrap()
    }

    fn verifier(bundle: &str) -> BundleVerifier {
        BundleVerifier::new(vec![pem(bundle)], Arc::new(rustls::crypto::ring::default_provider())).unwrap()
    }

    fn at(secs: i64) -> UnixTime {
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs as u64))
    }

    fn name(text: &str) -> ServerName<'static> {
        ServerName::try_from(text.to_string()).unwrap()
    }

    #[test]
    fn the_self_signed_bundle_certificate_is_accepted_for_its_names_only() {
        let verifier = verifier(SELF_SIGNED);
        let cert = pem(SELF_SIGNED);
        let now = at(NOT_BEFORE + 3600);
        for ok in ["127.0.0.1", "host"] {
            assert!(verifier.verify_server_cert(&cert, &[], &name(ok), &[], now).is_ok(), "{ok}");
        }
        let err = verifier.verify_server_cert(&cert, &[], &name("localhost"), &[], now).unwrap_err();
        assert_eq!(err, rustls::Error::InvalidCertificate(CertificateError::NotValidForName));
        // Another certificate with the same subject and names is webpki's to refuse.
        let other = pem(SAME_SUBJECT_OTHER_KEY);
        let err = verifier.verify_server_cert(&other, &[], &name("127.0.0.1"), &[], now).unwrap_err();
        assert!(is_ca_used_as_end_entity(&err), "{err:?}");
    }

    #[test]
    fn the_self_signed_bundle_certificate_counts_only_within_its_validity() {
        assert_eq!(validity(pem(SELF_SIGNED).as_ref()), Some((NOT_BEFORE, NOT_AFTER)));
        let verifier = verifier(SELF_SIGNED);
        let cert = pem(SELF_SIGNED);
        for (when, expected) in
            [(NOT_BEFORE - 1, CertificateError::NotValidYet), (NOT_AFTER + 1, CertificateError::Expired)]
        {
            let err = verifier.verify_pinned(&cert, &name("127.0.0.1"), at(when)).unwrap_err();
            assert_eq!(err, rustls::Error::InvalidCertificate(expected));
            assert!(verifier.verify_server_cert(&cert, &[], &name("127.0.0.1"), &[], at(when)).is_err());
        }
        assert!(verifier.verify_pinned(&cert, &name("127.0.0.1"), at(NOT_AFTER)).is_ok());
    }

    #[test]
    fn an_empty_bundle_is_refused() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        assert!(BundleVerifier::new(Vec::new(), provider).is_err());
    }
}
