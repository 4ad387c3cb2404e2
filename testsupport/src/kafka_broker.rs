//! A single-node Apache Kafka broker in KRaft combined mode on 127.0.0.1, run from the oracle's
//! Maven-fetched jars: the live source of the wire tests (and of anything else that needs a
//! real broker).
//!
//! [`KafkaBroker::start`] picks two free ports (bound on 127.0.0.1:0, then released), writes
//! `server.properties` into its directory (`process.roles=broker,controller`, one voter, the
//! transaction and offsets topics with replication factor 1 and min ISR 1,
//! `group.initial.rebalance.delay.ms=0`, no topic auto-creation, an 18 s broker session so
//! that a busy machine does not fence the broker from its own controller; a broker restarted
//! after SIGKILL registers again once the old session expires, within that time), formats the storage with
//! Kafka's `StorageTool format --standalone`, starts `kafka.Kafka` with its output in
//! `broker.log`, and waits (bounded) until the broker answers ApiVersions and Metadata. A failed
//! start includes the tail of `broker.log` in its error.
//!
//! [`KafkaBroker::start_secure`] adds a second listener, `SECURE`, speaking `SASL_SSL`
//! ([`SecureListener`]: a PEM keystore, SCRAM users created by `StorageTool format
//! --add-scram`, PLAIN users in the listener's JAAS config, optionally Kafka's
//! `StandardAuthorizer` with super users); the PLAINTEXT listener stays (the readiness probe,
//! Kafka's own producer and admin as the super user `User:ANONYMOUS`).
//!
//! [`KafkaBroker::stop`] ends the broker by its process id (SIGTERM, then SIGKILL after a grace
//! period), [`KafkaBroker::kill`] SIGKILLs it (a crash), [`KafkaBroker::restart`] starts it
//! again on the same directories and ports. Dropping a `KafkaBroker` kills its process: no
//! broker outlives its owner.
//!
//! [`KafkaCluster::start`] runs N such nodes as one cluster: each node is a broker and a
//! controller (KRaft combined mode) with a static quorum of all N controllers
//! (`controller.quorum.voters`, so `StorageTool format` needs no `--standalone`), the internal
//! topics replicated `min(3, N)` times, a 6 s broker session (a killed broker is fenced and its
//! partitions' leadership moves within seconds). Nodes are killed, stopped and restarted by id;
//! [`KafkaCluster::leader`] asks Metadata for a partition's leader, [`KafkaCluster::log_dir`]
//! gives each node's data directory. Dropping the cluster kills every node.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::jvm::Oracle;
use kmirror_harness::wire::{codes, KafkaClient, WireError};

/// How long [`KafkaBroker::start`] waits for the broker to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long [`KafkaBroker::stop`] waits after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(20);
/// The broker's `node.id`.
pub const NODE_ID: i32 = 1;

/// Why a broker could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// An I/O error on the broker's files or processes.
    #[error("Kafka broker in {}: cannot {action}: {source}", dir.display())]
    Io {
        /// The broker's directory.
        dir: PathBuf,
        /// What was being done.
        action: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// `StorageTool format` failed.
    #[error("formatting the Kafka broker's storage in {} failed: {output}", dir.display())]
    Format {
        /// The broker's directory.
        dir: PathBuf,
        /// What the tool printed.
        output: String,
    },
    /// The broker exited or did not answer in time.
    #[error(
        "the Kafka broker in {} did not start ({reason}); the end of {}:\n{tail}",
        dir.display(),
        dir.join("broker.log").display()
    )]
    NotReady {
        /// The broker's directory.
        dir: PathBuf,
        /// What happened.
        reason: String,
        /// The last lines of `broker.log`.
        tail: String,
    },
}

/// A running (or stopped) single-node broker. See the [module documentation](self).
#[derive(Debug)]
pub struct KafkaBroker {
    dir: PathBuf,
    classpath: String,
    port: u16,
    child: Option<Child>,
    /// `host:port` of the SASL_SSL listener of [`KafkaBroker::start_secure`].
    secure: Option<String>,
    /// `StorageTool format --add-scram` arguments.
    scram: Vec<String>,
}

/// The `SECURE` (SASL_SSL) listener of [`KafkaBroker::start_secure`].
#[derive(Clone, Debug, Default)]
pub struct SecureListener {
    /// A PEM file with the broker's private key (PKCS#8, unencrypted) and certificate chain
    /// (`ssl.keystore.type=PEM`).
    pub keystore_pem: PathBuf,
    /// The host name the listener advertises (its certificate must name it); it listens on
    /// 127.0.0.1.
    pub advertised_host: String,
    /// SCRAM credentials created with the storage: `(mechanism, user, password)`, e.g.
    /// `("SCRAM-SHA-512", "mirror", "secret")`.
    pub scram_users: Vec<(String, String, String)>,
    /// PLAIN users of the listener: `(user, password)`.
    pub plain_users: Vec<(String, String)>,
    /// With `Some`, Kafka's `StandardAuthorizer` runs with these super users besides
    /// `User:ANONYMOUS` (the PLAINTEXT and controller listeners), and no ACL means no access.
    pub super_users: Option<Vec<String>>,
}

impl KafkaBroker {
    /// Writes the config into `dir` (created if missing), formats the storage, starts the
    /// broker and waits until it answers. `extra` lines are appended to `server.properties`.
    pub fn start(
        oracle: &Oracle,
        dir: &Path,
        extra: &[(&str, &str)],
    ) -> Result<KafkaBroker, BrokerError> {
        KafkaBroker::start_with(oracle, dir, extra, None)
    }

    /// As [`start`](Self::start), with a `SECURE` SASL_SSL listener as `secure` describes
    /// ([`secure_bootstrap`](Self::secure_bootstrap)).
    pub fn start_secure(
        oracle: &Oracle,
        dir: &Path,
        extra: &[(&str, &str)],
        secure: &SecureListener,
    ) -> Result<KafkaBroker, BrokerError> {
        KafkaBroker::start_with(oracle, dir, extra, Some(secure))
    }

    fn start_with(
        oracle: &Oracle,
        dir: &Path,
        extra: &[(&str, &str)],
        secure: Option<&SecureListener>,
    ) -> Result<KafkaBroker, BrokerError> {
        let io = |action: &str| {
            let dir = dir.to_path_buf();
            let action = action.to_owned();
            move |source| BrokerError::Io {
                dir,
                action,
                source,
            }
        };
        std::fs::create_dir_all(dir.join("data")).map_err(io("create its directory"))?;
        let dir = std::path::absolute(dir).map_err(io("resolve its directory"))?;
        let port = free_port().map_err(io("find a free port"))?;
        let controller_port = free_port().map_err(io("find a free port"))?;
        let mut properties = format!(
            "# kmirror test broker: single-node KRaft, broker and controller in one process\n\
             process.roles=broker,controller\n\
             node.id={NODE_ID}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}\n\
             log.dirs={}\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=1\n\
             group.initial.rebalance.delay.ms=0\n\
             broker.session.timeout.ms=18000\n\
             initial.broker.registration.timeout.ms=120000\n\
             transaction.max.timeout.ms=3600000\n",
            dir.join("data").display()
        );
        let mut secure_address = None;
        let mut scram = Vec::new();
        if let Some(listener) = secure {
            let secure_port = free_port().map_err(io("find a free port"))?;
            let host = &listener.advertised_host;
            secure_address = Some(format!("{host}:{secure_port}"));
            properties = properties
                .replace(
                    &format!("listeners=PLAINTEXT://127.0.0.1:{port},"),
                    &format!(
                        "listeners=PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure_port},"
                    ),
                )
                .replace(
                    &format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"),
                    &format!(
                        "advertised.listeners=PLAINTEXT://127.0.0.1:{port},\
                         SECURE://{host}:{secure_port}\n"
                    ),
                )
                .replace(
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,\
                     SECURE:SASL_SSL",
                );
            properties.push_str(&secure_properties(listener));
            scram = listener
                .scram_users
                .iter()
                .map(|(mechanism, user, password)| {
                    format!("{mechanism}=[name={user},password={password}]")
                })
                .collect();
        }
        for (key, value) in extra {
            properties.push_str(&format!("{key}={value}\n"));
        }
        std::fs::write(dir.join("server.properties"), properties)
            .map_err(io("write server.properties"))?;
        let mut broker = KafkaBroker {
            dir: dir.clone(),
            classpath: oracle.classpath().to_owned(),
            port,
            child: None,
            secure: secure_address,
            scram,
        };
        broker.format()?;
        broker.spawn()?;
        Ok(broker)
    }

    /// The broker's directory (`server.properties`, `broker.log`, `data/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `127.0.0.1:<port>` of the PLAINTEXT listener.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `host:port` of the SASL_SSL listener (the advertised host), for a broker started with
    /// [`start_secure`](Self::start_secure).
    pub fn secure_bootstrap(&self) -> Option<String> {
        self.secure.clone()
    }

    /// The broker's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The partition directory `data/<topic>-<partition>` (Kafka's layout).
    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.dir.join("data").join(format!("{topic}-{partition}"))
    }

    /// The last `lines` lines of `broker.log`.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.dir.join("broker.log"), lines)
    }

    /// Stops the broker: SIGTERM by process id, SIGKILL if it is still running after
    /// [`STOP_GRACE`]. Stopping a stopped broker does nothing.
    pub fn stop(&mut self) -> Result<(), BrokerError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        child.wait().map(|_| ()).map_err(|source| BrokerError::Io {
            dir: self.dir.clone(),
            action: "wait for the broker to exit".into(),
            source,
        })
    }

    /// Kills the broker at once (SIGKILL): a crash, as a broker that disappears mid-fetch.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on the same directories and ports (after [`stop`](Self::stop)
    /// or [`kill`](Self::kill)) and waits until it answers.
    pub fn restart(&mut self) -> Result<(), BrokerError> {
        self.stop()?;
        self.spawn()
    }

    fn java(&self) -> Command {
        let mut command = Command::new("java");
        command
            .arg("-Xms64m")
            .arg("-Xmx768m")
            .arg("-cp")
            .arg(&self.classpath);
        command
    }

    fn format(&self) -> Result<(), BrokerError> {
        if self.dir.join("data/meta.properties").exists() {
            return Ok(());
        }
        let mut command = self.java();
        command
            .arg("kafka.tools.StorageTool")
            .arg("format")
            .arg("-t")
            .arg(cluster_id())
            .arg("-c")
            .arg(self.dir.join("server.properties"))
            .arg("--standalone");
        for credential in &self.scram {
            command.arg("--add-scram").arg(credential);
        }
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|source| BrokerError::Io {
                dir: self.dir.clone(),
                action: "run StorageTool format (is java on PATH?)".into(),
                source,
            })?;
        if !output.status.success() {
            return Err(BrokerError::Format {
                dir: self.dir.clone(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
            });
        }
        Ok(())
    }

    fn spawn(&mut self) -> Result<(), BrokerError> {
        let io = |action: &str| {
            let dir = self.dir.clone();
            let action = action.to_owned();
            move |source| BrokerError::Io {
                dir,
                action,
                source,
            }
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("broker.log"))
            .map_err(io("open broker.log"))?;
        let err = log.try_clone().map_err(io("open broker.log"))?;
        let child = self
            .java()
            .arg("kafka.Kafka")
            .arg(self.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io("start kafka.Kafka (is java on PATH?)"))?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Waits until the broker answers ApiVersions and Metadata, or fails with the log's tail.
    fn wait_ready(&mut self) -> Result<(), BrokerError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let address = self.bootstrap();
        let mut last;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(self.not_ready(format!("the process exited with {status}")));
                }
            }
            let mut client =
                KafkaClient::new(&address, Duration::from_secs(1), Duration::from_secs(5));
            match client.metadata("__kmirror_readiness_probe") {
                Ok(_) => return Ok(()),
                Err(WireError::Broker { code, .. })
                    if code == codes::UNKNOWN_TOPIC_OR_PARTITION =>
                {
                    return Ok(())
                }
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(self.not_ready(format!(
                    "no answer at {address} within {} s; last error: {last}",
                    START_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn not_ready(&self, reason: String) -> BrokerError {
        BrokerError::NotReady {
            dir: self.dir.clone(),
            reason,
            tail: format!(
                "{}\n...\n{}",
                errors(&self.dir.join("broker.log"), 10),
                self.log_tail(30)
            ),
        }
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `server.properties` lines of the `SECURE` listener.
fn secure_properties(listener: &SecureListener) -> String {
    const PREFIX: &str = "listener.name.secure";
    let mut out = format!(
        "{PREFIX}.ssl.keystore.type=PEM\n\
         {PREFIX}.ssl.keystore.location={}\n\
         {PREFIX}.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN\n\
         {PREFIX}.scram-sha-256.sasl.jaas.config=\
         org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         {PREFIX}.scram-sha-512.sasl.jaas.config=\
         org.apache.kafka.common.security.scram.ScramLoginModule required;\n",
        listener.keystore_pem.display()
    );
    let plain: String = listener
        .plain_users
        .iter()
        .map(|(user, password)| format!(" user_{user}=\"{password}\""))
        .collect();
    out.push_str(&format!(
        "{PREFIX}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
         required{plain};\n"
    ));
    if let Some(supers) = &listener.super_users {
        let mut all = vec!["User:ANONYMOUS".to_owned()];
        all.extend(supers.iter().cloned());
        out.push_str(&format!(
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
             super.users={}\n",
            all.join(";")
        ));
    }
    out
}

/// A port that was free on 127.0.0.1 a moment ago.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A fresh cluster id: 16 bytes from the clock and the process id, as Kafka's base64url `Uuid`.
fn cluster_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    cluster_id_from(&format!("{nanos}:{}", std::process::id()))
}

/// The cluster id [`cluster_id`] derives from `seed`.
///
/// Like Kafka's `Uuid.randomUuid`, it never starts with `-`: `kafka-storage format -t -abc`
/// reads `-abc` as an option and fails with "argument --cluster-id/-t: expected one argument".
/// The first byte's top six bits, which pick the first base64 character, are kept in 16..=31
/// (`Q`..=`f`), which also keeps the id away from Kafka's reserved all-zero ids.
fn cluster_id_from(seed: &str) -> String {
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let h = kmirror_kernel::partitioner::murmur2(format!("{i}:{seed}").as_bytes());
        chunk.copy_from_slice(&h.to_be_bytes());
    }
    bytes[0] = (bytes[0] & 0x3f) | 0x40;
    base64_url(&bytes)
}

/// Base64 with the URL alphabet and no padding (Kafka's `Uuid.toString`).
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// The first `count` lines of a log naming an ERROR or FATAL.
fn errors(path: &Path, count: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.contains(" ERROR ") || l.contains(" FATAL "))
        .take(count)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `lines` lines of a file (at most its last 64 KiB), or a note why there are none.
fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("({} cannot be read)", path.display());
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 << 10)));
    let mut text = String::new();
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_ok() {
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_kafka_uuids() {
        let id = cluster_id();
        assert_eq!(id.len(), 22);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        // CI once failed when a clock-derived id began with '-' (argparse took it for an option).
        for seed in 0..10_000 {
            let id = cluster_id_from(&seed.to_string());
            let first = id.chars().next().unwrap();
            assert!(first.is_ascii_alphabetic(), "{id} from seed {seed}");
        }
        assert_eq!(base64_url(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64_url(b"Man"), "TWFu");
    }
}

/// The `node.id`s of a [`KafkaCluster`] are `1..=N`.
pub const FIRST_NODE_ID: i32 = 1;

/// One node of a [`KafkaCluster`].
#[derive(Debug)]
struct ClusterNode {
    id: i32,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

/// N KRaft nodes (broker and controller each) on 127.0.0.1. See the [module
/// documentation](self).
pub struct KafkaCluster {
    classpath: String,
    nodes: Vec<ClusterNode>,
    /// The proxies of the `LINK` listener ([`KafkaCluster::start_behind_links`]), by node.
    links: Vec<crate::link::Link>,
}

impl std::fmt::Debug for KafkaCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaCluster")
            .field("nodes", &self.nodes)
            .field("links", &self.links.len())
            .finish_non_exhaustive()
    }
}

impl KafkaCluster {
    /// Writes the configs of `n` nodes into `dir/node-<id>` (ids 1..=n), formats their
    /// storage with one cluster id, starts them all and waits until every broker is registered
    /// (a Metadata answer lists all n). `extra` lines are appended to every
    /// `server.properties`.
    pub fn start(
        oracle: &Oracle,
        dir: &Path,
        n: i32,
        extra: &[(&str, &str)],
    ) -> Result<KafkaCluster, BrokerError> {
        KafkaCluster::start_with(oracle, dir, n, extra, None)
    }

    /// As [`start`](Self::start), with a second listener `LINK` on every node that clients
    /// reach only through a [`Link`](crate::link::Link) proxy with `link` (a delay, a
    /// bandwidth cap): each node advertises its proxy's address on `LINK`, so a client that
    /// bootstraps from [`link_bootstrap`](Self::link_bootstrap) and follows the metadata stays
    /// behind the link. The PLAINTEXT listener stays direct (setup, the readiness probe).
    pub fn start_behind_links(
        oracle: &Oracle,
        dir: &Path,
        n: i32,
        extra: &[(&str, &str)],
        link: crate::link::LinkOptions,
    ) -> Result<KafkaCluster, BrokerError> {
        KafkaCluster::start_with(oracle, dir, n, extra, Some(link))
    }

    /// The proxies' addresses of the `LINK` listener, separated by commas (empty without links).
    pub fn link_bootstrap(&self) -> String {
        self.links
            .iter()
            .map(|l| l.address().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn start_with(
        oracle: &Oracle,
        dir: &Path,
        n: i32,
        extra: &[(&str, &str)],
        link: Option<crate::link::LinkOptions>,
    ) -> Result<KafkaCluster, BrokerError> {
        let io = |action: &str| {
            let dir = dir.to_path_buf();
            let action = action.to_owned();
            move |source| BrokerError::Io {
                dir,
                action,
                source,
            }
        };
        std::fs::create_dir_all(dir).map_err(io("create its directory"))?;
        let dir = std::path::absolute(dir).map_err(io("resolve its directory"))?;
        let mut ports = Vec::new();
        // Hold every listener until all ports are picked, so that no two are the same.
        let mut held = Vec::new();
        for _ in 0..3 * n {
            let listener = TcpListener::bind("127.0.0.1:0").map_err(io("find a free port"))?;
            ports.push(
                listener
                    .local_addr()
                    .map_err(io("find a free port"))?
                    .port(),
            );
            held.push(listener);
        }
        drop(held);
        let voters: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "{}@127.0.0.1:{}",
                    FIRST_NODE_ID + i,
                    ports[(2 * i + 1) as usize]
                )
            })
            .collect();
        let replication = n.min(3);
        let cluster_id = cluster_id();
        let mut cluster = KafkaCluster {
            classpath: oracle.classpath().to_owned(),
            nodes: Vec::new(),
            links: Vec::new(),
        };
        for i in 0..n {
            let id = FIRST_NODE_ID + i;
            let node_dir = dir.join(format!("node-{id}"));
            std::fs::create_dir_all(node_dir.join("data"))
                .map_err(io("create a node directory"))?;
            let port = ports[(2 * i) as usize];
            let controller_port = ports[(2 * i + 1) as usize];
            let link_port = ports[(2 * n + i) as usize];
            let mut properties = format!(
                "# kmirror test cluster node {id}: KRaft broker and controller, static quorum\n\
                 process.roles=broker,controller\n\
                 node.id={id}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 controller.quorum.voters={voters}\n\
                 log.dirs={data}\n\
                 num.partitions=1\n\
                 default.replication.factor={replication}\n\
                 auto.create.topics.enable=false\n\
                 unclean.leader.election.enable=false\n\
                 offsets.topic.replication.factor={replication}\n\
                 offsets.topic.num.partitions=1\n\
                 transaction.state.log.replication.factor={replication}\n\
                 transaction.state.log.min.isr=1\n\
                 transaction.state.log.num.partitions=1\n\
                 group.initial.rebalance.delay.ms=0\n\
                 broker.session.timeout.ms=6000\n\
                 broker.heartbeat.interval.ms=1000\n\
                 initial.broker.registration.timeout.ms=120000\n\
                 transaction.max.timeout.ms=3600000\n",
                voters = voters.join(","),
                data = node_dir.join("data").display(),
            );
            if let Some(options) = link {
                let upstream = SocketAddr::from(([127, 0, 0, 1], link_port));
                let proxy = crate::link::Link::start(upstream, options)
                    .map_err(io("start the link proxy"))?;
                properties = properties
                    .replace(
                        &format!("listeners=PLAINTEXT://127.0.0.1:{port},"),
                        &format!(
                            "listeners=PLAINTEXT://127.0.0.1:{port},LINK://127.0.0.1:{link_port},"
                        ),
                    )
                    .replace(
                        &format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"),
                        &format!(
                            "advertised.listeners=PLAINTEXT://127.0.0.1:{port},LINK://{}\n",
                            proxy.address()
                        ),
                    )
                    .replace(
                        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,\
                         LINK:PLAINTEXT",
                    );
                cluster.links.push(proxy);
            }
            for (key, value) in extra {
                properties.push_str(&format!("{key}={value}\n"));
            }
            std::fs::write(node_dir.join("server.properties"), properties)
                .map_err(io("write server.properties"))?;
            cluster.nodes.push(ClusterNode {
                id,
                dir: node_dir,
                port,
                child: None,
            });
        }
        for node in &cluster.nodes {
            cluster.format(node, &cluster_id)?;
        }
        for i in 0..cluster.nodes.len() {
            cluster.spawn(i)?;
        }
        cluster.wait_registered(n as usize)?;
        Ok(cluster)
    }

    /// The node ids, in order.
    pub fn ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// `127.0.0.1:<port>` of node `id`'s PLAINTEXT listener.
    ///
    /// # Panics
    /// When the cluster has no node `id` (a test bug).
    pub fn address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.node(id).port)
    }

    /// Every node's address, separated by commas (a client's `bootstrap.servers`).
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The addresses of the running nodes, separated by commas.
    pub fn running_bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `id`'s directory (`server.properties`, `broker.log`, `data/`).
    pub fn node_dir(&self, id: i32) -> &Path {
        &self.node(id).dir
    }

    /// Node `id`'s log dir (`data/`, Kafka's `log.dirs`).
    pub fn log_dir(&self, id: i32) -> PathBuf {
        self.node(id).dir.join("data")
    }

    /// The partition directory `<log dir>/<topic>-<partition>` on node `id`.
    pub fn partition_dir(&self, id: i32, topic: &str, partition: i32) -> PathBuf {
        self.log_dir(id).join(format!("{topic}-{partition}"))
    }

    /// Whether node `id` runs (was not killed or stopped).
    pub fn is_running(&self, id: i32) -> bool {
        self.node(id).child.is_some()
    }

    /// The last `lines` lines of node `id`'s `broker.log`.
    pub fn log_tail(&self, id: i32, lines: usize) -> String {
        tail(&self.node(id).dir.join("broker.log"), lines)
    }

    /// The leader (node id) of `topic`-`partition` and its leader epoch, as a running node's
    /// Metadata says (`None` for no leader).
    pub fn leader(&self, topic: &str, partition: i32) -> Result<Option<(i32, i32)>, WireError> {
        let mut last = None;
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            let address = format!("127.0.0.1:{}", node.port);
            let mut client =
                KafkaClient::new(&address, Duration::from_secs(1), Duration::from_secs(5));
            match client.metadata(topic) {
                Ok(m) => {
                    return Ok(m
                        .partitions
                        .iter()
                        .find(|p| p.index == partition)
                        .filter(|p| p.leader_id >= 0)
                        .map(|p| (p.leader_id, p.leader_epoch)))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| WireError::Connect {
            address: self.bootstrap(),
            source: std::io::Error::other("no node runs"),
        }))
    }

    /// Waits (up to `timeout`) until `topic`-`partition` has a leader other than `not`;
    /// returns it and its epoch.
    pub fn wait_for_leader(
        &self,
        topic: &str,
        partition: i32,
        not: Option<i32>,
        timeout: Duration,
    ) -> Option<(i32, i32)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some((leader, epoch))) = self.leader(topic, partition) {
                if Some(leader) != not {
                    return Some((leader, epoch));
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Kills node `id` at once (SIGKILL): a crash. Killing a dead node does nothing.
    pub fn kill(&mut self, id: i32) {
        if let Some(mut child) = self.node_mut(id).child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops node `id` (SIGTERM: a controlled shutdown that moves its leaderships first;
    /// SIGKILL after [`STOP_GRACE`]).
    pub fn stop(&mut self, id: i32) -> Result<(), BrokerError> {
        let node = self.node_mut(id);
        let Some(mut child) = node.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        child.wait().map(|_| ()).map_err(|source| BrokerError::Io {
            dir: node.dir.clone(),
            action: "wait for the node to exit".into(),
            source,
        })
    }

    /// Starts node `id` again on the same directories and ports and waits until the cluster
    /// lists it among its brokers.
    pub fn restart(&mut self, id: i32) -> Result<(), BrokerError> {
        self.stop(id)?;
        let index = self.index(id);
        self.spawn(index)?;
        let running = self.nodes.iter().filter(|n| n.child.is_some()).count();
        self.wait_registered(running)
    }

    fn index(&self, id: i32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .unwrap_or_else(|| panic!("the test cluster has no node {id}"))
    }

    fn node(&self, id: i32) -> &ClusterNode {
        &self.nodes[self.index(id)]
    }

    fn node_mut(&mut self, id: i32) -> &mut ClusterNode {
        let index = self.index(id);
        &mut self.nodes[index]
    }

    fn java(&self) -> Command {
        let mut command = Command::new("java");
        command
            .arg("-Xms64m")
            .arg("-Xmx512m")
            .arg("-XX:+UseSerialGC")
            .arg("-cp")
            .arg(&self.classpath);
        command
    }

    fn format(&self, node: &ClusterNode, cluster_id: &str) -> Result<(), BrokerError> {
        if node.dir.join("data/meta.properties").exists() {
            return Ok(());
        }
        let output = self
            .java()
            .arg("kafka.tools.StorageTool")
            .arg("format")
            .arg("-t")
            .arg(cluster_id)
            .arg("-c")
            .arg(node.dir.join("server.properties"))
            .stdin(Stdio::null())
            .output()
            .map_err(|source| BrokerError::Io {
                dir: node.dir.clone(),
                action: "run StorageTool format (is java on PATH?)".into(),
                source,
            })?;
        if !output.status.success() {
            return Err(BrokerError::Format {
                dir: node.dir.clone(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
            });
        }
        Ok(())
    }

    fn spawn(&mut self, index: usize) -> Result<(), BrokerError> {
        let mut command = self.java();
        let node = &mut self.nodes[index];
        let io = |action: &str| {
            let dir = node.dir.clone();
            let action = action.to_owned();
            move |source| BrokerError::Io {
                dir,
                action,
                source,
            }
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("broker.log"))
            .map_err(io("open broker.log"))?;
        let err = log.try_clone().map_err(io("open broker.log"))?;
        let child = command
            .arg("kafka.Kafka")
            .arg(node.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io("start kafka.Kafka (is java on PATH?)"))?;
        node.child = Some(child);
        Ok(())
    }

    /// Waits until a running node's Metadata lists `count` brokers, or fails with the logs'
    /// tails (a node that exited is an error at once).
    fn wait_registered(&mut self, count: usize) -> Result<(), BrokerError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut last = String::from("no answer yet");
        loop {
            for node in &mut self.nodes {
                if let Some(child) = node.child.as_mut() {
                    if let Ok(Some(status)) = child.try_wait() {
                        node.child = None;
                        let dir = node.dir.clone();
                        let reason = format!("node {} exited with {status}", node.id);
                        return Err(self.not_ready(&dir, reason));
                    }
                }
            }
            for node in self.nodes.iter().filter(|n| n.child.is_some()) {
                let address = format!("127.0.0.1:{}", node.port);
                let mut client =
                    KafkaClient::new(&address, Duration::from_secs(1), Duration::from_secs(5));
                match client.metadata_topics(Some(&[])) {
                    Ok(m) if m.brokers.len() >= count => return Ok(()),
                    Ok(m) => {
                        last = format!("{address} lists {} of {count} brokers", m.brokers.len())
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            if Instant::now() >= deadline {
                let dir = self.nodes[0].dir.clone();
                for node in &mut self.nodes {
                    if let Some(mut child) = node.child.take() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                }
                return Err(self.not_ready(
                    &dir,
                    format!(
                        "the cluster did not register {count} brokers within {} s; last: {last}",
                        START_TIMEOUT.as_secs()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn not_ready(&self, dir: &Path, reason: String) -> BrokerError {
        BrokerError::NotReady {
            dir: dir.to_path_buf(),
            reason,
            tail: format!(
                "{}\n...\n{}",
                errors(&dir.join("broker.log"), 10),
                tail(&dir.join("broker.log"), 30)
            ),
        }
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
