//! A SigV4 signer for requests S3 SDKs do not make (a WebDAV `COPY` to a gateway), signed with
//! an unsigned payload, as S3 accepts for any request.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = hmac::Hmac<Sha256>;

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The headers that sign `method` on `url` (host, x-amz-date, x-amz-content-sha256 and the
/// Authorization header), signing also `extra` headers (lowercase names).
pub fn sign(
    method: &str,
    url: &url::Url,
    extra: &[(String, String)],
    access_key: &str,
    secret_key: &str,
    region: &str,
) -> Vec<(String, String)> {
    let now = time::OffsetDateTime::now_utc();
    let amz_date = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let date = &amz_date[..8];
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let mut headers: Vec<(String, String)> = vec![
        ("host".into(), host),
        ("x-amz-content-sha256".into(), "UNSIGNED-PAYLOAD".into()),
        ("x-amz-date".into(), amz_date.clone()),
    ];
    headers.extend(extra.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string())));
    headers.sort();
    let mut query: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (encode(&k), encode(&v))).collect();
    query.sort();
    let canonical_query = query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed = headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(";");
    let canonical =
        format!("{method}\n{}\n{canonical_query}\n{canonical_headers}\n{signed}\nUNSIGNED-PAYLOAD", url.path());
    let scope = format!("{date}/{region}/s3/aws4_request");
    let to_sign =
        format!("AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}", hex::encode(Sha256::digest(canonical.as_bytes())));
    let mut key = hmac(format!("AWS4{secret_key}").as_bytes(), date);
    for part in [region, "s3", "aws4_request"] {
        key = hmac(&key, part);
    }
    let signature = hex::encode(hmac(&key, &to_sign));
    headers.push((
        "authorization".into(),
        format!("AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"),
    ));
    headers
}

/// URI-encodes a query component as SigV4 wants it.
fn encode(s: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    percent_encoding::utf8_percent_encode(s, KEEP).to_string()
}
