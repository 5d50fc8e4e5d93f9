//! The control socket of a running switch: a Unix stream socket (mode 0600) answering one
//! request per line with one JSON document per line.
//!
//! Requests: `stats`; `pause <port> <queue>`; `resume <port> <queue>`. External controllers
//! that need microseconds rather than a socket round trip write the AFC ring next to the socket
//! instead ([`afc_path`], `dataplane::port::shm`).

use crate::stats::SwitchSnapshot;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A control request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Stats,
    Pause { port: usize, queue: usize },
    Resume { port: usize, queue: usize },
}

impl Request {
    pub fn parse(line: &str) -> Result<Request, String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<usize, String> {
            w.get(i)
                .ok_or("missing argument")?
                .parse::<usize>()
                .map_err(|e| format!("bad number: {e}"))
        };
        match w.first().copied() {
            Some("stats") => Ok(Request::Stats),
            Some("pause") => Ok(Request::Pause {
                port: num(1)?,
                queue: num(2)?,
            }),
            Some("resume") => Ok(Request::Resume {
                port: num(1)?,
                queue: num(2)?,
            }),
            Some(c) => Err(format!("unknown request `{c}`")),
            None => Err("empty request".into()),
        }
    }

    pub fn to_line(&self) -> String {
        match self {
            Request::Stats => "stats".into(),
            Request::Pause { port, queue } => format!("pause {port} {queue}"),
            Request::Resume { port, queue } => format!("resume {port} {queue}"),
        }
    }
}

/// A control response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Stats(Box<SwitchSnapshot>),
    Ok,
    Error(String),
}

/// Serves requests on `path` until the process exits; `handle` answers each request.
pub fn serve(
    path: &Path,
    handle: impl Fn(Request) -> Response + Send + Sync + 'static,
) -> std::io::Result<PathBuf> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let handle = std::sync::Arc::new(handle);
    std::thread::Builder::new()
        .name("xoff-ctl".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let h = handle.clone();
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut w = match conn.try_clone() {
                    Ok(w) => w,
                    Err(_) => continue,
                };
                for line in BufReader::new(conn).lines() {
                    let Ok(line) = line else { break };
                    let resp = match Request::parse(&line) {
                        Ok(r) => h(r),
                        Err(e) => Response::Error(e),
                    };
                    let mut s = serde_json::to_string(&resp)
                        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
                    s.push('\n');
                    if w.write_all(s.as_bytes()).is_err() {
                        break;
                    }
                }
            }
        })?;
    Ok(path.to_path_buf())
}

/// Sends one request to the socket at `path`.
pub fn request(path: &Path, req: &Request) -> std::io::Result<Response> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{}\n", req.to_line()).as_bytes())?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Default socket of switch `name`.
pub fn default_socket(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/xoff/{name}.sock"))
}

/// The AFC command ring of switch `name` whose control socket is `sock`: `NAME.afc` in the
/// same directory.
pub fn afc_path(sock: &Path, name: &str) -> PathBuf {
    sock.with_file_name(format!("{name}.afc"))
}
