//! `isthmus copy SOURCE DEST`: an S3-native third-party copy between two S3 endpoints, done by
//! an Isthmus gateway (the destination's by default, which pulls; `--run-on source` pushes
//! instead), so the bytes never pass through this machine. Each side is an object URL
//! (`http://host:port/bucket/key`): a presigned URL as given, or signed here with that side's
//! keys (the remote side is presigned for the gateway; the gateway's own side signs the COPY
//! request). Pulls run parallel streams, fetch a chunk again when its connection drops, and are
//! verified against the source's digest before they are stored.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use clap::{Args, ValueEnum};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The source object: http(s)://host:port/bucket/key (or a presigned URL)
    pub source: String,
    /// The destination object: http(s)://host:port/bucket/key (or a presigned URL)
    pub destination: String,
    /// The source side's keys, ACCESS:SECRET [required with --run-on source; else none: the
    /// URL as given]
    #[arg(long, env = "ISTHMUS_SOURCE_KEYS", hide_env_values = true)]
    pub source_keys: Option<String>,
    /// The destination side's keys, ACCESS:SECRET [required with --run-on destination; else
    /// none: the URL as given]
    #[arg(long, env = "ISTHMUS_DEST_KEYS", hide_env_values = true)]
    pub dest_keys: Option<String>,
    /// Which side's gateway (an Isthmus) does the copy
    #[arg(long, value_enum, default_value_t = RunOn::Destination)]
    pub run_on: RunOn,
    /// Parallel streams of a pull
    #[arg(long, default_value_t = 4)]
    pub streams: usize,
    /// Refuse a source that sends no checksum
    #[arg(long)]
    pub require_checksum: bool,
    /// The region both sides sign for
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// PEM file of the CA that signed the copying gateway's certificate, or of its self-signed
    /// certificate itself (https) [default: the built-in Mozilla (webpki) roots]
    #[arg(long)]
    pub ca_bundle: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunOn {
    Source,
    Destination,
}

/// How long a presigned remote side stays valid: long enough for a large copy.
const PRESIGN_FOR: Duration = Duration::from_secs(12 * 3600);

struct Side {
    url: url::Url,
    keys: Option<(String, String)>,
}

impl Side {
    fn parse(url: &str, keys: Option<&str>, what: &str) -> Result<Self, String> {
        let url: url::Url = url.parse().map_err(|e| format!("{what} {url:?} is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{what} must be an http(s) URL of an object"));
        }
        let keys = keys
            .map(|k| k.split_once(':').map(|(a, s)| (a.to_string(), s.to_string())))
            .map(|k| k.ok_or_else(|| format!("{what} keys must be ACCESS:SECRET")))
            .transpose()?;
        Ok(Self { url, keys })
    }

    fn is_presigned(&self) -> bool {
        self.url.query_pairs().any(|(k, _)| k == "X-Amz-Signature" || k == "Signature")
    }

    /// The URL the gateway uses for this (remote) side: presigned here if keys are given.
    fn remote_url(&self, put: bool, region: &str) -> Result<String, String> {
        let Some((access, secret)) = &self.keys else { return Ok(self.url.to_string()) };
        if self.is_presigned() {
            return Ok(self.url.to_string());
        }
        let path = self.url.path().trim_start_matches('/');
        let (bucket, key) = path.split_once('/').ok_or("an object URL is http(s)://host:port/bucket/key")?;
        let key = percent_encoding::percent_decode_str(key).decode_utf8_lossy().into_owned();
        let mut endpoint = self.url.clone();
        endpoint.set_path("/");
        endpoint.set_query(None);
        let bucket = Bucket::new(endpoint, UrlStyle::Path, bucket.to_string(), region.to_string())
            .map_err(|e| format!("{}: {e}", self.url))?;
        let credentials = Credentials::new(access.clone(), secret.clone());
        Ok(if put {
            bucket.put_object(Some(&credentials), &key).sign(PRESIGN_FOR).to_string()
        } else {
            bucket.get_object(Some(&credentials), &key).sign(PRESIGN_FOR).to_string()
        })
    }
}

pub fn run(args: CopyArgs) -> Result<(), String> {
    let source = Side::parse(&args.source, args.source_keys.as_deref(), "the source")?;
    let destination = Side::parse(&args.destination, args.dest_keys.as_deref(), "the destination")?;
    let (local, header) = match args.run_on {
        RunOn::Destination => (&destination, ("source", source.remote_url(false, &args.region)?)),
        RunOn::Source => (&source, ("destination", destination.remote_url(true, &args.region)?)),
    };
    let mut headers =
        vec![(header.0.to_string(), header.1), ("x-number-of-streams".to_string(), args.streams.to_string())];
    if args.require_checksum {
        headers.push(("requirechecksumverification".into(), "true".into()));
    }
    let mut url = local.url.clone();
    url.set_query(None);
    let signed = match &local.keys {
        Some((access, secret)) => isthmus_grid::sigv4::sign("COPY", &url, &headers, access, secret, &args.region),
        None => return Err("the copying side needs keys: --dest-keys (or --source-keys with --run-on source)".into()),
    };
    let agent = isthmus_grid::tls_bundle::agent(
        ureq::Agent::config_builder().http_status_as_error(false).allow_non_standard_methods(true),
        args.ca_bundle.as_deref(),
    )?;
    let mut request = ureq::http::Request::builder().method("COPY").uri(url.as_str());
    for (name, value) in &signed {
        if name != "host" {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    let request = request.body(()).map_err(|e| e.to_string())?;
    let response = agent.run(request).map_err(|e| format!("cannot reach {}: {e}", url))?;
    let status = response.status().as_u16();
    let reader = BufReader::new(response.into_body().into_reader());
    if status != 202 {
        let text: String = reader.lines().map_while(Result::ok).collect::<Vec<_>>().join(" ");
        return Err(format!("the gateway refused the copy ({status}): {text}"));
    }
    let mut outcome = None;
    for line in reader.lines() {
        let line = line.map_err(|e| format!("the copy's progress stream broke: {e}"))?;
        if let Some(bytes) = line.trim().strip_prefix("Stripe Bytes Transferred:") {
            eprintln!("  {} bytes", bytes.trim());
        } else if line.starts_with("success:") || line.starts_with("failure:") {
            outcome = Some(line);
        }
    }
    match outcome {
        Some(line) if line.starts_with("success:") => {
            println!(
                "copied {} -> {}",
                args.source.split('?').next().unwrap_or_default(),
                args.destination.split('?').next().unwrap_or_default()
            );
            Ok(())
        }
        Some(line) => Err(format!("the copy failed: {}", line.trim_start_matches("failure:").trim())),
        None => Err("the copy's progress stream ended without an outcome; run the same command again".into()),
    }
}
