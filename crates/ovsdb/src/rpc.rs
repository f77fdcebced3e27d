//! JSON-RPC 1.0 as OVSDB uses it (RFC 7047 §4): messages are JSON objects written back to
//! back on the stream with no delimiter, so [`Decoder`] finds where each ends by scanning
//! brackets and strings (each byte once, however the stream is cut), then parses that slice.

use serde_json::{json, Value};

/// A message that is longer than this is refused (the connection is then closed).
pub const MAX_MESSAGE: usize = 64 << 20;

/// A JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: a reply with the same id is expected.
    Request {
        /// The id (any JSON but null).
        id: Value,
        /// The method, e.g. `echo`, `transact`.
        method: String,
        /// The parameters (an array).
        params: Value,
    },
    /// A notification (id null): no reply, e.g. a monitor's `update`.
    Notification {
        /// The method.
        method: String,
        /// The parameters.
        params: Value,
    },
    /// The reply to a request.
    Response {
        /// The request's id.
        id: Value,
        /// The result (null on error).
        result: Value,
        /// The error (null on success).
        error: Value,
    },
}

/// What is wrong with a message or the stream.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RpcError {
    /// Not JSON.
    #[error("not JSON: {0}")]
    Json(String),
    /// JSON, but not a JSON-RPC message.
    #[error("not a JSON-RPC message: {0}")]
    Shape(&'static str),
    /// Longer than [`MAX_MESSAGE`].
    #[error("a message longer than {MAX_MESSAGE} bytes")]
    TooLong,
}

impl Message {
    /// Reads a message from its JSON.
    pub fn parse(v: Value) -> Result<Message, RpcError> {
        let Value::Object(mut o) = v else {
            return Err(RpcError::Shape("not an object"));
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(method) = o.remove("method") {
            let method = method
                .as_str()
                .ok_or(RpcError::Shape("method is not a string"))?
                .to_string();
            let params = o.remove("params").unwrap_or_else(|| json!([]));
            return Ok(if id.is_null() {
                Message::Notification { method, params }
            } else {
                Message::Request { id, method, params }
            });
        }
        if !o.contains_key("result") && !o.contains_key("error") {
            return Err(RpcError::Shape("neither method nor result"));
        }
        Ok(Message::Response {
            id,
            result: o.remove("result").unwrap_or(Value::Null),
            error: o.remove("error").unwrap_or(Value::Null),
        })
    }

    /// The message as JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Message::Request { id, method, params } => {
                json!({"id": id, "method": method, "params": params})
            }
            Message::Notification { method, params } => {
                json!({"id": null, "method": method, "params": params})
            }
            Message::Response { id, result, error } => {
                json!({"id": id, "result": result, "error": error})
            }
        }
    }

    /// The message's bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }
}

/// Cuts a byte stream into JSON values.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned.
    scanned: usize,
    depth: u32,
    in_string: bool,
    escape: bool,
}

impl Decoder {
    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message, if the bytes so far hold one.
    pub fn next_message(&mut self) -> Result<Option<Message>, RpcError> {
        match self.next_value()? {
            Some(v) => Message::parse(v).map(Some),
            None => Ok(None),
        }
    }

    /// The next whole JSON value (an object or array at top level), if any.
    pub fn next_value(&mut self) -> Result<Option<Value>, RpcError> {
        while self.scanned < self.buf.len() {
            let b = self.buf[self.scanned];
            self.scanned += 1;
            if self.in_string {
                match (self.escape, b) {
                    (true, _) => self.escape = false,
                    (false, b'\\') => self.escape = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' if self.depth > 0 => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        let end = self.scanned;
                        let parsed = serde_json::from_slice(&self.buf[..end]);
                        self.buf.drain(..end);
                        self.scanned = 0;
                        return parsed.map(Some).map_err(|e| RpcError::Json(e.to_string()));
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' if self.depth == 0 => {
                    self.buf.drain(..self.scanned);
                    self.scanned = 0;
                }
                _ if self.depth == 0 => {
                    return Err(RpcError::Json(format!(
                        "byte {:?} outside any message",
                        b as char
                    )))
                }
                _ => {}
            }
        }
        if self.buf.len() > MAX_MESSAGE {
            return Err(RpcError::TooLong);
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ovsdb-server sent for a monitor's first change and its keepalive (captured).
    const STREAM: &str = concat!(
        r#"{"id":"echo","method":"echo","params":[]}"#,
        r#"{"id":null,"method":"update","params":["hayate",{"Bridge":{"5a1b":{"new":{"name":"br0","fail_mode":["set",[]]}}}}]}"#,
        r#"{"id":3,"result":[{"count":1}],"error":null}"#,
    );

    #[test]
    fn cuts_a_stream_however_it_arrives() {
        for cut in 1..STREAM.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for chunk in STREAM.as_bytes().chunks(cut) {
                d.push(chunk);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got.len(), 3, "chunks of {cut}");
            assert_eq!(
                got[0],
                Message::Request {
                    id: json!("echo"),
                    method: "echo".into(),
                    params: json!([])
                }
            );
            match &got[1] {
                Message::Notification { method, params } => {
                    assert_eq!(method, "update");
                    assert_eq!(params[1]["Bridge"]["5a1b"]["new"]["name"], "br0");
                }
                m => panic!("{m:?}"),
            }
            assert_eq!(
                got[2],
                Message::Response {
                    id: json!(3),
                    result: json!([{"count": 1}]),
                    error: Value::Null
                }
            );
        }
    }

    #[test]
    fn brackets_inside_strings_do_not_end_a_message() {
        let mut d = Decoder::default();
        d.push(br#"{"id":1,"result":"a}\"]{","error":null} "#);
        assert_eq!(
            d.next_message().unwrap(),
            Some(Message::Response {
                id: json!(1),
                result: json!("a}\"]{"),
                error: Value::Null
            })
        );
        assert_eq!(d.next_message().unwrap(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_hang() {
        let mut d = Decoder::default();
        d.push(b"HTTP/1.1 400");
        assert!(d.next_message().is_err());
        let mut d = Decoder::default();
        d.push(b"{\"a\":,}");
        assert!(matches!(d.next_message(), Err(RpcError::Json(_))));
        assert_eq!(
            Message::parse(json!({"id": 1})),
            Err(RpcError::Shape("neither method nor result"))
        );
    }

    #[test]
    fn encodes_what_parses_back() {
        let m = Message::Request {
            id: json!(7),
            method: "transact".into(),
            params: json!(["Open_vSwitch", {"op": "comment", "comment": "x"}]),
        };
        let mut d = Decoder::default();
        d.push(&m.encode());
        assert_eq!(d.next_message().unwrap(), Some(m));
    }
}
