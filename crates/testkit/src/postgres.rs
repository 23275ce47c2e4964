//! A real PostgreSQL for tests: a throwaway cluster (initdb in a temp dir, `pg_ctl` on a free
//! loopback port, its unix socket in the temp dir, trust auth, stopped and removed on drop), or,
//! when `SWITCHYARD_TEST_POSTGRES` names a running server's URL, a fresh database on it.
//!
//! PostgreSQL refuses to run as root, so as root (CI) the cluster runs as `nobody` with its
//! temp dir handed over to that user; other users run it as themselves. Binaries come from
//! `SWITCHYARD_POSTGRES_BIN`, else Debian's `/usr/lib/postgresql/<newest>/bin`, else `PATH`.
//! When there are none, [`PgCluster::start`] gives `Ok(None)` (the test says it skipped) unless
//! `SWITCHYARD_REQUIRE_POSTGRES` is set, which makes it an error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// Names a running server to use instead of a throwaway cluster (`postgres://user@host/db`; the
/// user must be allowed to create databases).
pub const EXTERNAL_ENV: &str = "SWITCHYARD_TEST_POSTGRES";
/// Set (to anything) to make missing PostgreSQL binaries an error instead of a skip.
pub const REQUIRE_ENV: &str = "SWITCHYARD_REQUIRE_POSTGRES";
/// A directory holding `initdb` and `pg_ctl`.
pub const BIN_ENV: &str = "SWITCHYARD_POSTGRES_BIN";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A unique name for this process (`prefix_<pid>_<n>_<nanos>`).
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The directory with `initdb` and `pg_ctl`, if any.
pub fn binaries() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os(BIN_ENV).map(PathBuf::from) {
        return has_both(&dir).then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).find(|dir| has_both(dir))
}

/// The user a cluster runs as when we are root: `nobody`'s uid and gid from `/etc/passwd`.
fn unprivileged_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&"nobody") && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .unwrap_or((65534, 65534))
}

fn is_root() -> bool {
    // No libc here: the owner of a file we just created is our effective uid.
    let probe = std::env::temp_dir().join(unique("switchyard-uid-probe"));
    let root = std::fs::write(&probe, b"")
        .and_then(|()| std::fs::metadata(&probe))
        .map(|metadata| std::os::unix::fs::MetadataExt::uid(&metadata) == 0)
        .unwrap_or(false);
    let _ = std::fs::remove_file(&probe);
    root
}

fn run(command: &mut Command, what: &str) -> Result<Output, String> {
    let output = command
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output)
}

/// A throwaway PostgreSQL cluster on 127.0.0.1 (trust auth, superuser `postgres`).
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    /// `(uid, gid)` the server runs as when we are root.
    run_as: Option<(u32, u32)>,
}

impl PgCluster {
    /// Starts a cluster. `Ok(None)`: no PostgreSQL binaries here and none required (the caller
    /// prints that it skipped).
    pub fn start() -> Result<Option<Self>, String> {
        let Some(bin) = binaries() else {
            if std::env::var_os(REQUIRE_ENV).is_some() {
                return Err(format!(
                    "{REQUIRE_ENV} is set but no PostgreSQL binaries (initdb, pg_ctl) were found \
                     (install Debian's `postgresql`, or set {BIN_ENV})"
                ));
            }
            return Ok(None);
        };
        let dir = std::env::temp_dir().join(unique("switchyard-pg"));
        std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let run_as = is_root().then(unprivileged_user);
        let cluster = PgCluster {
            bin,
            dir,
            port: 0,
            run_as,
        };
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&cluster.dir, Some(uid), Some(gid))
                .map_err(|e| format!("handing {} to uid {uid}: {e}", cluster.dir.display()))?;
        }
        let mut cluster = cluster;
        run(
            cluster
                .command("initdb")
                .arg("-D")
                .arg(cluster.data())
                .args(["-A", "trust", "-U", "postgres", "--no-locale", "-E", "UTF8"])
                .arg("--no-sync"),
            "initdb",
        )?;
        cluster.port = free_port()?;
        cluster.start_server()?;
        Ok(Some(cluster))
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A command for one of the binaries, as the cluster's user.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command.current_dir(&self.dir).env("LC_ALL", "C");
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::process::CommandExt::uid(&mut command, uid);
            std::os::unix::process::CommandExt::gid(&mut command, gid);
        }
        command
    }

    /// Starts the server (again) on its port and waits until it accepts connections.
    pub fn start_server(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off",
            self.port,
            self.dir.display()
        );
        run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
            "pg_ctl start",
        )
        .map(drop)
    }

    /// Stops the server (fast shutdown: connections are cut, as when a database goes away).
    pub fn stop_server(&self) -> Result<(), String> {
        run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-w", "-t", "60", "-m", "fast", "stop"]),
            "pg_ctl stop",
        )
        .map(drop)
    }

    /// The URL of database `db` as the superuser `postgres`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-t", "30", "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// A fresh, empty database for one test: on the `SWITCHYARD_TEST_POSTGRES` server, or in a
/// throwaway cluster of its own.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    cluster: Option<PgCluster>,
}

impl TestDatabase {
    /// `Ok(None)` when there is no PostgreSQL to test against and none is required.
    pub fn create() -> Result<Option<Self>, String> {
        if let Ok(server) = std::env::var(EXTERNAL_ENV) {
            return create_database(&server).map(|url| Some(TestDatabase { url, cluster: None }));
        }
        let Some(cluster) = PgCluster::start()? else {
            return Ok(None);
        };
        let url = create_database(&cluster.url("postgres"))?;
        Ok(Some(TestDatabase {
            url,
            cluster: Some(cluster),
        }))
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Another fresh database on the same server.
    pub fn another(&self) -> Result<String, String> {
        create_database(&self.url)
    }

    /// The throwaway cluster, if this database has one (tests that stop the server need it).
    pub fn cluster(&self) -> Option<&PgCluster> {
        self.cluster.as_ref()
    }
}

/// Creates a uniquely named database on the server `server_url` reaches; its URL. On a thread of
/// its own: the blocking client may not run inside an async test's runtime.
fn create_database(server_url: &str) -> Result<String, String> {
    let server_url = server_url.to_owned();
    std::thread::spawn(move || create_database_here(&server_url))
        .join()
        .map_err(|_| "creating a test database panicked".to_owned())?
}

fn create_database_here(server_url: &str) -> Result<String, String> {
    let name = unique("switchyard_test");
    let mut client = postgres::Client::connect(server_url, postgres::NoTls)
        .map_err(|e| format!("connecting to the test server: {e}"))?;
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .map_err(|e| format!("creating database {name}: {e}"))?;
    let mut url = url::Url::parse(server_url).map_err(|e| format!("the server URL: {e}"))?;
    url.set_path(&format!("/{name}"));
    Ok(url.to_string())
}

/// Prints why a PostgreSQL test did not run (call when [`TestDatabase::create`] gave `None`).
pub fn skip_message(test: &str) {
    eprintln!(
        "{test}: skipped: no PostgreSQL binaries (initdb, pg_ctl) and {EXTERNAL_ENV} unset; \
         install Debian's `postgresql` or set {REQUIRE_ENV}=1 to make this an error"
    );
}
