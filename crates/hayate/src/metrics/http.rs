//! The smallest HTTP/1.1 server Prometheus needs: `GET /metrics` answers the exposition,
//! another path 404, another method on /metrics 405 (with `Allow: GET`), a request line that
//! does not parse 400. One request per connection (`Connection: close`); a client that sends
//! no complete head within [`HEAD_TIMEOUT`], or more than [`HEAD_MAX`] bytes of it, is
//! dropped or refused; past [`MAX_CLIENTS`] at once, a new connection is closed. The
//! scrape itself runs on tokio's blocking pool, off the agent's one worker thread.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request head accepted.
pub const HEAD_MAX: usize = 8192;
/// Clients served at once; more are closed at once, so that a flood of connections cannot
/// take the descriptors the controllers' listeners budget on.
pub const MAX_CLIENTS: usize = 16;
/// The path the exposition is served on.
pub const PATH: &str = "/metrics";

/// Makes one scrape's text.
pub type Scraper = Arc<dyn Fn() -> String + Send + Sync>;

/// Accepts connections on `listener` until the task is aborted.
pub async fn serve(listener: TcpListener, scrape: Scraper) {
    let clients = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let Ok(permit) = clients.clone().try_acquire_owned() else {
                    continue;
                };
                let scrape = scrape.clone();
                tokio::spawn(async move {
                    answer(stream, scrape).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of descriptors, most likely: back off rather than spin.
                tracing::warn!("metrics: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads one request head from `stream` and answers it.
async fn answer(mut stream: TcpStream, scrape: Scraper) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(head)) => head,
        _ => return,
    };
    let reply = match route(&head) {
        Route::Scrape => match tokio::task::spawn_blocking(move || scrape()).await {
            Ok(body) => response("200 OK", super::CONTENT_TYPE, &[], body.as_bytes()),
            Err(_) => response("500 Internal Server Error", TEXT, &[], b"scrape failed\n"),
        },
        Route::Reply(r) => r,
    };
    let _ = stream.write_all(&reply).await;
    let _ = stream.shutdown().await;
}

/// The request head: the bytes up to and with the empty line, or up to [`HEAD_MAX`] (then
/// [`route`] finds no end and refuses it).
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_MAX {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

const TEXT: &str = "text/plain; charset=utf-8";

/// What to do with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Scrape and answer 200.
    Scrape,
    /// Answer these bytes.
    Reply(Vec<u8>),
}

/// Routes a request head.
pub fn route(head: &[u8]) -> Route {
    let complete = head.windows(4).any(|w| w == b"\r\n\r\n");
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next())
    else {
        return Route::Reply(response("400 Bad Request", TEXT, &[], b"bad request\n"));
    };
    if !complete || !version.starts_with("HTTP/1.") {
        return Route::Reply(response("400 Bad Request", TEXT, &[], b"bad request\n"));
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != PATH {
        let body = format!("not found: the metrics are at {PATH}\n");
        return Route::Reply(response("404 Not Found", TEXT, &[], body.as_bytes()));
    }
    if method != "GET" {
        let body = format!("method {method} not allowed: use GET\n");
        return Route::Reply(response(
            "405 Method Not Allowed",
            TEXT,
            &[("Allow", "GET")],
            body.as_bytes(),
        ));
    }
    Route::Scrape
}

/// A whole response.
fn response(status: &str, content_type: &str, extra: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(r: &Route) -> String {
        match r {
            Route::Scrape => "scrape".into(),
            Route::Reply(b) => String::from_utf8_lossy(b)
                .lines()
                .next()
                .unwrap()
                .to_string(),
        }
    }

    #[test]
    fn get_metrics_scrapes_and_other_requests_are_refused() {
        let r = |h: &str| route(h.as_bytes());
        assert_eq!(r("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Route::Scrape);
        assert_eq!(r("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Scrape);
        assert_eq!(
            status(&r("GET / HTTP/1.1\r\n\r\n")),
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            status(&r("POST /x HTTP/1.1\r\n\r\n")),
            "HTTP/1.1 404 Not Found"
        );
        let post = r("POST /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&post), "HTTP/1.1 405 Method Not Allowed");
        let Route::Reply(bytes) = post else {
            unreachable!()
        };
        assert!(String::from_utf8_lossy(&bytes).contains("\r\nAllow: GET\r\n"));
        assert_eq!(
            status(&r("GET /metrics\r\n\r\n")),
            "HTTP/1.1 400 Bad Request"
        );
        assert_eq!(
            status(&r("GET /metrics HTTP/1.1\r\n")),
            "HTTP/1.1 400 Bad Request"
        );
        assert_eq!(status(&r("")), "HTTP/1.1 400 Bad Request");
    }

    #[test]
    fn responses_carry_their_length() {
        let b = response("404 Not Found", TEXT, &[], b"abc");
        let text = String::from_utf8(b).unwrap();
        assert!(text.contains("Content-Length: 3\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nabc"), "{text}");
    }
}
