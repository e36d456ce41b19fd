//! A plain HTTP/1.1 GET, for the operator's `/readyz` and `/metrics` in
//! containers and pods (no client library needed for two lines of HTTP).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

/// `GET path` on `address:port`: the status code and the body. An error
/// says what went wrong (connection refused while a server starts, say).
pub fn get(address: IpAddr, port: u16, path: &str) -> Result<(u16, String), String> {
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&SocketAddr::new(address, port), timeout)
        .map_err(|e| format!("{address}:{port}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {response:?}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// The value of an unlabelled metric in a Prometheus text exposition, e.g.
/// `kplug_plugins_registered`.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_unlabelled_metric() {
        let text = "# HELP kplug_plugins_registered plugins\n\
                    # TYPE kplug_plugins_registered gauge\n\
                    kplug_plugins_registered 3\n\
                    kplug_plugins_registered_total{x=\"y\"} 9\n";
        assert_eq!(metric(text, "kplug_plugins_registered"), Some(3.0));
        assert_eq!(metric(text, "kplug_missing"), None);
    }
}
