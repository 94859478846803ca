//! The client side of `isthmus admin` against a running gateway: finds the root user's keys
//! (`--keys`, the ISTHMUS_ROOT_* variables, the configuration's `root_user`, else the data
//! root's credentials file), signs each call with SigV4 and prints the answer as a table or
//! JSON. The calls themselves are `isthmus_s3::admin::route`'s.

use std::path::PathBuf;

use serde_json::Value;

/// Where the gateway is and how to prove being its root user.
#[derive(clap::Args, Debug, Clone)]
pub struct Connection {
    /// The gateway's S3 endpoint
    #[arg(
        long,
        global = true,
        env = "ISTHMUS_ENDPOINT",
        hide_env_values = true,
        default_value = "http://127.0.0.1:9000"
    )]
    pub endpoint: String,
    /// The root user's keys, ACCESS:SECRET [default: ISTHMUS_ROOT_ACCESS_KEY/SECRET_KEY, the
    /// --config root_user, else the data root's credentials file]
    #[arg(long, global = true, env = "ISTHMUS_ADMIN_KEYS", hide_env_values = true)]
    pub keys: Option<String>,
    /// The data root (its .isthmus/credentials.toml holds the root keys)
    #[arg(long, global = true, default_value = "./data")]
    pub root: PathBuf,
    /// A configuration file (its root_user keys; its [[quotas]] for `usage`) [default: none: no
    /// quotas]
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// PEM file of the CA that signed the gateway's certificate, or of the gateway's
    /// self-signed certificate itself (https endpoints) [default: the built-in Mozilla (webpki)
    /// roots]
    #[arg(long, global = true)]
    pub ca_bundle: Option<PathBuf>,
    /// Print JSON instead of a table
    #[arg(long, global = true)]
    pub json: bool,
}

/// The root keys, from the first place that has them.
fn root_keys(connection: &Connection) -> Result<(String, String), String> {
    if let Some(keys) = &connection.keys {
        return keys
            .split_once(':')
            .map(|(a, s)| (a.to_string(), s.to_string()))
            .ok_or_else(|| "--keys must be ACCESS:SECRET".into());
    }
    if let (Ok(access), Ok(secret)) =
        (std::env::var("ISTHMUS_ROOT_ACCESS_KEY"), std::env::var("ISTHMUS_ROOT_SECRET_KEY"))
    {
        return Ok((access, secret));
    }
    if let Some(path) = &connection.config
        && let Some(user) = crate::config::FileConfig::load(path)?.root_user
    {
        return Ok((user.access_key, user.secret_key));
    }
    let path = isthmus_session::users::credentials_path(&connection.root.join(".isthmus"));
    let user = isthmus_session::users::load_root(&path).map_err(|e| {
        format!("no root keys: {e}; give --keys ACCESS:SECRET, or --root DATA_ROOT on the gateway's host")
    })?;
    Ok((user.access_key, user.secret_key))
}

/// The message of an S3-style XML error body (or the body itself).
fn error_message(body: &str) -> String {
    let field = |tag: &str| {
        let start = body.find(&format!("<{tag}>"))? + tag.len() + 2;
        let end = body[start..].find(&format!("</{tag}>"))? + start;
        Some(body[start..end].replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    };
    match (field("Code"), field("Message")) {
        (Some(code), Some(message)) => format!("{message} ({code})"),
        _ => body.trim().to_string(),
    }
}

/// One administration call: `call` with `params`, a JSON `body` for POSTs.
pub fn call(
    connection: &Connection,
    call: &str,
    params: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<Value, String> {
    let (access, secret) = root_keys(connection)?;
    let mut url: url::Url =
        connection.endpoint.parse().map_err(|e| format!("--endpoint {:?} is not a URL: {e}", connection.endpoint))?;
    url.set_path("/");
    {
        let mut query = url.query_pairs_mut();
        query.clear().append_pair(isthmus_s3::admin::route::ADMIN_PARAMETER, call);
        for (name, value) in params {
            query.append_pair(name, value);
        }
    }
    let method = if body.is_some() { "POST" } else { "GET" };
    let signed = isthmus_grid::sigv4::sign(method, &url, &[], &access, &secret, "us-east-1");
    let mut request = ureq::http::Request::builder().method(method).uri(url.as_str());
    for (name, value) in &signed {
        if name != "host" {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    let agent = isthmus_grid::tls_bundle::agent(
        ureq::Agent::config_builder().http_status_as_error(false),
        connection.ca_bundle.as_deref(),
    )?;
    let result = match body {
        Some(body) => agent
            .run(request.header("content-type", "application/json").body(body.to_string()).map_err(|e| e.to_string())?),
        None => agent.run(request.body(()).map_err(|e| e.to_string())?),
    };
    let mut response = result.map_err(|e| format!("cannot reach the gateway at {}: {e}", connection.endpoint))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().map_err(|e| format!("the gateway's answer broke off: {e}"))?;
    if status != 200 {
        return Err(format!("the gateway refused ({status}): {}", error_message(&text)));
    }
    serde_json::from_str(&text).map_err(|e| format!("the gateway's answer is not JSON: {e}"))
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "-".into(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        Value::Object(map) => map.iter().map(|(k, v)| format!("{k}={}", text(v))).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}

/// Prints rows (JSON objects) as a table of `columns`, or as JSON lines.
pub fn print_rows(rows: &Value, columns: &[&str], json: bool) {
    let rows = rows.as_array().cloned().unwrap_or_default();
    if json {
        for row in rows {
            println!("{row}");
        }
        return;
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header(columns.iter().map(|c| c.replace('_', " ")));
    for row in &rows {
        table.add_row(columns.iter().map(|c| text(&row[*c])));
    }
    println!("{table}");
}

/// Prints one JSON object as `key: value` lines (nested objects indented), or as JSON.
pub fn print_object(value: &Value, json: bool) {
    if json {
        println!("{value}");
        return;
    }
    fn walk(value: &Value, indent: usize) {
        let Some(map) = value.as_object() else { return };
        for (key, item) in map {
            match item {
                Value::Object(_) => {
                    println!("{:indent$}{}:", "", key.replace('_', " "));
                    walk(item, indent + 2);
                }
                Value::Array(items) if items.iter().all(Value::is_object) && !items.is_empty() => {
                    println!("{:indent$}{}:", "", key.replace('_', " "));
                    for entry in items {
                        println!("{:width$}- {}", "", text(entry), width = indent + 2);
                    }
                }
                other => println!("{:indent$}{}: {}", "", key.replace('_', " "), text(other)),
            }
        }
    }
    walk(value, 0);
}
