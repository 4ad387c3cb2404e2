//! Kafka's own perf tools in one warm JVM (`ConsumerPerfBench.java` in the oracle module), for
//! the benchmarks that compare kmirror with Kafka: `kafka-consumer-perf-test` and
//! `kafka-producer-perf-test` run again and again without a JVM start each.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use kmirror_testsupport::jvm::Oracle;

/// `java` with the oracle's classpath, a bounded heap and Kafka's client logs at WARN.
pub fn java(oracle: &Oracle, main_class: &str) -> Command {
    let mut command = Command::new("java");
    command
        .arg("-Xms256m")
        .arg("-Xmx1g")
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .arg("-cp")
        .arg(oracle.classpath())
        .arg(main_class);
    command
}

/// The tool's CSV line: (records read, its nMsg.sec, its fetch.nMsg.sec).
fn tool_figures(csv: &str) -> (u64, f64, f64) {
    let fields: Vec<&str> = csv.split(',').map(str::trim).collect();
    assert!(fields.len() >= 10, "the tool's CSV line, got {csv:?}");
    let number = |i: usize| -> f64 {
        fields[i]
            .parse()
            .unwrap_or_else(|_| panic!("field {i} of {csv:?}"))
    };
    (fields[4].parse().expect("records"), number(5), number(9))
}

/// `ConsumerPerfBench.java`: Kafka's consumer perf test run again and again in one JVM.
pub struct PerfTest {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub bootstrap: String,
    runs: u64,
    /// The tool's own (nMsg.sec, fetch.nMsg.sec) of every run, per label.
    pub figures: Vec<(&'static str, f64, f64)>,
}

impl PerfTest {
    pub fn start(oracle: &Oracle, bootstrap: &str) -> PerfTest {
        let mut child = java(oracle, "dev.kmirror.oracle.ConsumerPerfBench")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("java starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        PerfTest {
            child,
            stdin,
            stdout,
            bootstrap: bootstrap.to_owned(),
            runs: 0,
            figures: Vec::new(),
        }
    }

    /// One run reading `records` records of `selection` (`--include R` or `--topic T`) with
    /// a fresh group; returns its time and checks it read them all.
    pub fn run(&mut self, label: &'static str, selection: [&str; 2], records: u64) -> Duration {
        self.runs += 1;
        let line = format!(
            "--bootstrap-server {} {} {} --num-records {records} --group kmirror-bench-{}-{} \
             --command-property isolation.level=read_committed --hide-header --timeout 60000",
            self.bootstrap,
            selection[0],
            selection[1],
            std::process::id(),
            self.runs
        );
        let (time, csv) = self.ask(&line);
        let (read, rate, fetch_rate) = tool_figures(&csv);
        assert_eq!(read, records, "the tool read every record: {csv}");
        self.figures.push((label, rate, fetch_rate));
        time
    }

    /// Sends one line to the JVM (a tool run, see `ConsumerPerfBench.java`): the run's time and
    /// the tool's last output line.
    pub fn ask(&mut self, line: &str) -> (Duration, String) {
        self.send(line);
        self.receive()
    }

    /// Starts a tool run (see [`PerfTest::ask`]) without waiting for it.
    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("the JVM reads");
        self.stdin.flush().expect("the JVM reads");
    }

    /// Waits for the run [`PerfTest::send`] started: its time and the tool's last line.
    pub fn receive(&mut self) -> (Duration, String) {
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).expect("the JVM answers");
        let (nanos, last) = answer
            .trim()
            .split_once('\t')
            .unwrap_or_else(|| panic!("ConsumerPerfBench died or answered {answer:?}"));
        (
            Duration::from_nanos(nanos.parse().expect("nanos")),
            last.to_owned(),
        )
    }
}

impl Drop for PerfTest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
