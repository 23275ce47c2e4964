//! A real nginx (Debian's package) for tests: a round-robin reverse proxy on a free loopback
//! port in front of some backends, run in the foreground as one process (no master and
//! workers, so killing it leaves nothing behind) from a temp dir, its access log naming the
//! backend that served each request, stopped on drop. [`Nginx::start`] gives `Ok(None)` when
//! there is no nginx binary (the test says it skipped) unless `SWITCHYARD_REQUIRE_NGINX` is set.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set (to anything) to make a missing nginx an error instead of a skip.
pub const REQUIRE_ENV: &str = "SWITCHYARD_REQUIRE_NGINX";

/// A running nginx.
pub struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

/// The nginx binary, if any: `/usr/sbin/nginx`, else `PATH`.
pub fn binary() -> Option<PathBuf> {
    let debian = PathBuf::from("/usr/sbin/nginx");
    if debian.is_file() {
        return Some(debian);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("nginx"))
        .find(|path| path.is_file())
}

impl Nginx {
    /// Round-robin over `backends` (`host:port` each), plain HTTP/1.1, no buffering either way
    /// (streams pass as they come).
    pub fn start(backends: &[String]) -> Result<Option<Self>, String> {
        let Some(binary) = binary() else {
            if std::env::var_os(REQUIRE_ENV).is_some() {
                return Err(format!("{REQUIRE_ENV} is set but there is no nginx"));
            }
            return Ok(None);
        };
        let dir = std::env::temp_dir().join(format!(
            "switchyard-nginx-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let root = dir.as_path();
        let servers: String = backends
            .iter()
            .map(|b| format!("    server {b};\n"))
            .collect();
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {root}/nginx.pid;\nerror_log {root}/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n\
             log_format upstream '$upstream_addr $status $request';\n\
             access_log {root}/access.log upstream;\n\
             client_body_temp_path {root}/body;\nproxy_temp_path {root}/proxy;\n\
             upstream backends {{\n{servers}}}\n\
             server {{\n  listen 127.0.0.1:{port};\n  client_max_body_size 64m;\n\
               location / {{\n    proxy_pass http://backends;\n    proxy_http_version 1.1;\n\
                 proxy_set_header Connection \"\";\n    proxy_set_header Host $http_host;\n\
                 proxy_buffering off;\n    proxy_request_buffering off;\n\
                 proxy_read_timeout 300s;\n  }}\n}}\n}}\n",
            root = root.display(),
        );
        let conf_path = root.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let child = Command::new(&binary)
            .arg("-p")
            .arg(root)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let nginx = Self {
            child,
            dir: dir.clone(),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!(
                    "nginx did not listen within 10 s: {}",
                    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Some(nginx))
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The access log: one `<backend> <status> <request line>` per request served.
    pub fn access_log(&self) -> Vec<String> {
        read_lines(&self.dir.join("access.log"))
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
