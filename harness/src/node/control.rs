//! The control channel: `kmirror stop|pause|resume --topics` reaching a running `kmirror mirror`.
//!
//! A node destination is held by one process at a time (its `.lock`). While a `kmirror mirror
//! --topics` run holds it, a `stop`, `pause` or `resume` of some of its topics cannot open it;
//! instead it hands the mirror a request through the destination's `control/` directory, and
//! the mirror applies it through the very path a command that holds the lock uses
//! ([`NodeDriver::request_topics`]: the kernel's controller, then the node manager).
//!
//! The serving side, [`ControlServer`], owns the directory and nothing else: it claims a
//! request and hands it to the driver (`Claim::Apply`), is handed back what applying it gave
//! (`ControlServer::applied`), and answers it from a status it is given
//! (`ControlServer::answer_settled`). The driver runs the requests
//! ([`NodeDriver::serve_control`]); the server never calls into it.
//!
//! The steps:
//!
//! 1. the command writes `control/<id>.request` ([`ControlRequest`], JSON) atomically: to
//!    `<id>.request.tmp`, fsynced, renamed;
//! 2. the mirror's driver loop, between fetch rounds (at most every [`CONTROL_POLL_MS`]),
//!    **claims** each request by renaming it to `<id>.taken` (a request the command withdrew
//!    first is gone: nothing happens), applies it, and answers refused topics at once;
//! 3. once every partition of the accepted topics has reached the request's state (STOPPED
//!    and writable, PAUSED, MIRRORING), or after [`SETTLE_MS`], or when the mirror ends, it
//!    writes `control/<id>.response` ([`ControlResponse`]: the per-topic results and those
//!    partitions' status) atomically and removes `<id>.taken`;
//! 4. the command reads the response, deletes it and prints it as if it had run the request
//!    itself.
//!
//! The command gives up on a request nobody claims (no mirror serves the directory: another
//! command holds it, or the process holding it is not a mirror) by deleting `<id>.request`:
//! if that deletion succeeds nothing was applied. A mirror that dies after claiming a request
//! leaves `<id>.taken`; the next mirror on the directory serves it again (the requests are
//! idempotent: a second stop of a stopped topic is a success that changes nothing).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use kmirror_kernel::config::StopStrategy;
use kmirror_kernel::state::MirrorState;
use serde::{Deserialize, Serialize};

use crate::segment::write_atomically;

#[cfg(doc)]
use super::driver::NodeDriver;
use super::driver::TopicResults;
use super::status::{NodeStatus, PartitionStatus};
use super::NodeError;

/// The control directory under a node destination.
pub const CONTROL_DIR: &str = "control";

/// How often a serving driver looks for requests (ms of its clock).
pub const CONTROL_POLL_MS: i64 = 100;

/// How long a serving driver waits for a request's partitions to settle before it answers
/// with what they are (ms of its clock).
pub const SETTLE_MS: i64 = 30_000;

const REQUEST: &str = "request";
const TAKEN: &str = "taken";
const RESPONSE: &str = "response";

/// Which mirror request `stop`, `pause` and `resume` send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopicsVerb {
    /// RemoveTopicsFromMirror: fail the topics over (STOPPED, writable).
    Stop,
    /// PauseMirrorTopics (PAUSED).
    Pause,
    /// ResumeMirrorTopics (MIRRORING again).
    Resume,
}

impl TopicsVerb {
    /// The state the request drives every partition of an accepted topic to.
    pub fn target(self) -> MirrorState {
        match self {
            TopicsVerb::Stop => MirrorState::Stopped,
            TopicsVerb::Pause => MirrorState::Paused,
            TopicsVerb::Resume => MirrorState::Mirroring,
        }
    }

    /// The command's name (`stop`, `pause`, `resume`).
    pub fn name(self) -> &'static str {
        match self {
            TopicsVerb::Stop => "stop",
            TopicsVerb::Pause => "pause",
            TopicsVerb::Resume => "resume",
        }
    }
}

/// A `stop`, `pause` or `resume` handed to the running mirror (`control/<id>.request`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// The request's id (file-name safe: letters, digits, `-`).
    pub id: String,
    /// What to do.
    pub verb: TopicsVerb,
    /// The topics, names and globs separated by commas, resolved on the destination.
    pub topics: String,
    /// The mirror named by `stop --mirror` (default: each topic's own).
    pub mirror: Option<String>,
    /// `stop --stop-strategy`: the mirror applies the request only if it runs with this one.
    pub stop_strategy: Option<StopStrategy>,
}

impl ControlRequest {
    /// A request with a fresh id (process id and the time in nanoseconds).
    pub fn new(verb: TopicsVerb, topics: &str, mirror: Option<&str>) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        ControlRequest {
            id: format!("{}-{nanos}", std::process::id()),
            verb,
            topics: topics.to_owned(),
            mirror: mirror.map(str::to_owned),
            stop_strategy: None,
        }
    }
}

/// The mirror's answer (`control/<id>.response`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlResponse {
    /// The request's id.
    pub id: String,
    /// Each topic (or selection entry selecting none) with its answer.
    pub results: TopicResults,
    /// The partitions of the accepted topics, as they were when the mirror answered.
    pub partitions: Vec<PartitionStatus>,
    /// Why the request was not applied at all (unreadable, another stop strategy).
    pub error: Option<String>,
}

/// A request applied and waiting for its partitions to settle.
#[derive(Debug)]
struct Pending {
    id: String,
    verb: TopicsVerb,
    results: TopicResults,
    accepted: Vec<String>,
    deadline_ms: i64,
}

/// The serving side, owned by a [`NodeDriver`] ([`NodeDriver::serve_control`]).
#[derive(Debug)]
pub struct ControlServer {
    dir: PathBuf,
    /// The running mirror's stop strategy: a request that names another is refused.
    stop_strategy: StopStrategy,
    pending: Vec<Pending>,
    next_poll_ms: i64,
}

/// What claiming a request gave ([`ControlServer::claim`]).
#[derive(Debug)]
pub(super) enum Claim {
    /// Its command withdrew it first: nothing happens.
    Withdrawn,
    /// It cannot be applied (unreadable, another stop strategy): answered already, with why.
    Refused,
    /// To apply ([`NodeDriver::request_topics`]); what that gives goes back to
    /// [`ControlServer::applied`].
    Apply(ControlRequest),
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> NodeError {
    NodeError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn file(dir: &Path, id: &str, kind: &str) -> PathBuf {
    dir.join(format!("{id}.{kind}"))
}

/// The ids of the files `*.<kind>` in `dir`, sorted (oldest requests first by id order).
fn ids(dir: &Path, kind: &str) -> Result<Vec<String>, NodeError> {
    let suffix = format!(".{kind}");
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io("list", dir, e))? {
        let entry = entry.map_err(|e| io("list", dir, e))?;
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(&suffix))
        {
            out.push(id.to_owned());
        }
    }
    out.sort();
    Ok(out)
}

impl ControlServer {
    /// Serves `root/control/` (created if missing) for a mirror that stops topics with
    /// `stop_strategy`. Requests a dead mirror had claimed (`<id>.taken`) are served again.
    pub fn new(root: &Path, stop_strategy: StopStrategy) -> Result<Self, NodeError> {
        let dir = root.join(CONTROL_DIR);
        fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
        for id in ids(&dir, TAKEN)? {
            let taken = file(&dir, &id, TAKEN);
            fs::rename(&taken, file(&dir, &id, REQUEST)).map_err(|e| io("rename", &taken, e))?;
        }
        Ok(ControlServer {
            dir,
            stop_strategy,
            pending: Vec::new(),
            next_poll_ms: i64::MIN,
        })
    }

    /// Whether an applied request waits for its partitions.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether it is time to look for requests (at most every [`CONTROL_POLL_MS`]): when it
    /// is, the next look is due [`CONTROL_POLL_MS`] later.
    pub(super) fn poll_due(&mut self, now_ms: i64) -> bool {
        if now_ms < self.next_poll_ms {
            return false;
        }
        self.next_poll_ms = now_ms.saturating_add(CONTROL_POLL_MS);
        true
    }

    /// The ids of the requests waiting to be claimed, in id order (oldest first).
    pub(super) fn requests(&self) -> Result<Vec<String>, NodeError> {
        ids(&self.dir, REQUEST)
    }

    /// Claims request `id` by renaming it to `<id>.taken` and reads it: withdrawn when its
    /// command deleted it first; refused (and answered at once) when it cannot be read or
    /// names another stop strategy than the running mirror's; otherwise to apply.
    pub(super) fn claim(&mut self, id: &str) -> Result<Claim, NodeError> {
        let request = file(&self.dir, id, REQUEST);
        let taken = file(&self.dir, id, TAKEN);
        match fs::rename(&request, &taken) {
            Ok(()) => {}
            // Withdrawn by its command in the meantime.
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Claim::Withdrawn),
            Err(e) => return Err(io("rename", &request, e)),
        }
        let parsed: Result<ControlRequest, String> = fs::read(&taken)
            .map_err(|e| format!("cannot read {}: {e}", taken.display()))
            .and_then(|b| {
                serde_json::from_slice(&b)
                    .map_err(|e| format!("{} is not a control request: {e}", taken.display()))
            });
        let request = match parsed {
            Ok(r) => r,
            Err(e) => {
                self.respond(&refusal(id, e))?;
                return Ok(Claim::Refused);
            }
        };
        let running = self.stop_strategy;
        if let Some(wanted) = request.stop_strategy.filter(|w| *w != running) {
            self.respond(&refusal(
                id,
                format!(
                    "the running mirror stops topics with {running:?}, not {wanted:?}; stop that \
                     mirror first, or leave --stop-strategy out"
                ),
            ))?;
            return Ok(Claim::Refused);
        }
        Ok(Claim::Apply(request))
    }

    /// Takes back what applying the claimed request `id` gave: an error is answered at once
    /// as the request's refusal; results wait for the accepted topics' partitions to settle
    /// ([`ControlServer::answer_settled`]), and the line describing them is returned for the
    /// mirror's events.
    pub(super) fn applied(
        &mut self,
        id: &str,
        request: &ControlRequest,
        applied: Result<TopicResults, NodeError>,
        now_ms: i64,
    ) -> Result<Option<String>, NodeError> {
        let results = match applied {
            Ok(results) => results,
            Err(e) => {
                self.respond(&refusal(id, e.to_string()))?;
                return Ok(None);
            }
        };
        let line = format!(
            "control: {} {} (request {id}): {}",
            request.verb.name(),
            request.topics,
            describe(&results)
        );
        let accepted: Vec<String> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(t, _)| t.clone())
            .collect();
        self.pending.push(Pending {
            id: id.to_owned(),
            verb: request.verb,
            results,
            accepted,
            deadline_ms: now_ms.saturating_add(SETTLE_MS),
        });
        Ok(Some(line))
    }

    /// Answers every pending request whose partitions settled in `status` (the running
    /// mirror's), or that is overdue, or all of them with `all` (the mirror is ending).
    pub(super) fn answer_settled(
        &mut self,
        status: &NodeStatus,
        now_ms: i64,
        all: bool,
    ) -> Result<(), NodeError> {
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            let partitions: Vec<PartitionStatus> = status
                .partitions
                .iter()
                .filter(|s| p.accepted.contains(&s.topic))
                .cloned()
                .collect();
            let target = p.verb.target().to_string();
            let settled = partitions
                .iter()
                .all(|s| s.state == target && (p.verb != TopicsVerb::Stop || s.writable));
            if settled || all || now_ms >= p.deadline_ms {
                self.respond(&ControlResponse {
                    id: p.id.clone(),
                    results: p.results.clone(),
                    partitions,
                    error: None,
                })?;
            } else {
                keep.push(p);
            }
        }
        self.pending = keep;
        Ok(())
    }

    fn respond(&self, response: &ControlResponse) -> Result<(), NodeError> {
        let text = serde_json::to_vec_pretty(response).map_err(|e| NodeError::Invalid {
            message: format!("cannot encode the control response: {e}"),
        })?;
        write_atomically(&self.dir, &format!("{}.{RESPONSE}", response.id), &text).map_err(
            |source| NodeError::Log {
                dir: self.dir.clone(),
                source: Box::new(source),
            },
        )?;
        let taken = file(&self.dir, &response.id, TAKEN);
        match fs::remove_file(&taken) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("delete", &taken, e)),
        }
    }
}

/// The answer refusing request `id` as a whole, saying why.
fn refusal(id: &str, error: String) -> ControlResponse {
    ControlResponse {
        id: id.to_owned(),
        results: TopicResults::new(),
        partitions: Vec::new(),
        error: Some(error),
    }
}

/// "orders ok, nope UNKNOWN_TOPIC_OR_PARTITION".
fn describe(results: &TopicResults) -> String {
    let parts: Vec<String> = results
        .iter()
        .map(|(t, r)| match r {
            Ok(_) => format!("{t} ok"),
            Err(e) => format!("{t} {}", e.code),
        })
        .collect();
    parts.join(", ")
}

/// Where a submitted request stands, for the command waiting on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestStatus {
    /// Nobody has claimed it yet.
    Waiting,
    /// A mirror claimed it and is applying it.
    Claimed,
    /// The mirror's answer (its file is deleted once read).
    Answered(ControlResponse),
}

/// The command's side of the channel: one submitted request.
#[derive(Debug)]
pub struct ControlClient {
    dir: PathBuf,
    id: String,
}

impl ControlClient {
    /// Writes `request` into `root/control/` (created if missing) atomically.
    pub fn submit(root: &Path, request: &ControlRequest) -> Result<Self, NodeError> {
        let dir = root.join(CONTROL_DIR);
        fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
        let text = serde_json::to_vec_pretty(request).map_err(|e| NodeError::Invalid {
            message: format!("cannot encode the control request: {e}"),
        })?;
        write_atomically(&dir, &format!("{}.{REQUEST}", request.id), &text).map_err(|source| {
            NodeError::Log {
                dir: dir.clone(),
                source: Box::new(source),
            }
        })?;
        Ok(ControlClient {
            dir,
            id: request.id.clone(),
        })
    }

    /// The request's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the request stands; an answer is read and its file deleted.
    pub fn status(&self) -> Result<RequestStatus, NodeError> {
        let response = file(&self.dir, &self.id, RESPONSE);
        match fs::read(&response) {
            Ok(bytes) => {
                let answer: ControlResponse =
                    serde_json::from_slice(&bytes).map_err(|e| NodeError::BadFile {
                        file: response.clone(),
                        line: 0,
                        reason: format!("not a control response: {e}"),
                    })?;
                let _ = fs::remove_file(&response);
                return Ok(RequestStatus::Answered(answer));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io("read", &response, e)),
        }
        Ok(if file(&self.dir, &self.id, REQUEST).exists() {
            RequestStatus::Waiting
        } else {
            RequestStatus::Claimed
        })
    }

    /// Takes the request back if nobody claimed it: true when it was withdrawn (nothing was
    /// applied), false when a mirror claimed it first.
    pub fn withdraw(&self) -> Result<bool, NodeError> {
        let request = file(&self.dir, &self.id, REQUEST);
        match fs::remove_file(&request) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io("delete", &request, e)),
        }
    }
}
