//! 100 MiB of Claude stream-json through what a live attempt does with it:
//! cut into lines, written to the transcript, parsed, rendered.
//!
//! `cargo bench --bench agent_stream` prints, before divan's table, the peak
//! resident memory (VmHWM) before and after one 100 MiB pass of each path, so
//! "memory stays flat" is visible next to the throughput.
//!
//! - `pipeline`: the in-process path (splitter + Claude parser + renderer +
//!   transcript file), fed 64 KiB chunks of generated output.
//! - `supervised_fake_agent`: the whole supervisor on the fake agent's
//!   `flood:100` (a real process, pipes, threads, channels; the fake's own
//!   JSON writing is included in the time).

use divan::Bencher;
use divan::counter::BytesCount;
use serde_json::json;
use spectr::agent::lines::{LineSplitter, parse_block};
use spectr::agent::parse::{ClaudeParser, LineParser};
use spectr::agent::supervisor::start;
use spectr::agent::{AgentKind, CommandSpec, SuperviseOptions, SupervisorEvent};
use spectr::ui::agent_render::write_event;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TOTAL: usize = 100 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

fn main() {
    let block = sample_block();
    let dir = tempfile::tempdir().expect("temp dir");

    reset_peak();
    let before = peak_kib();
    let t = Instant::now();
    let rendered = pipeline(&block, &dir.path().join("pipeline.log"));
    let secs = t.elapsed().as_secs_f64();
    println!(
        "pipeline: {} MiB in {:.2}s = {:.0} MiB/s; rendered {} MiB; peak RSS (VmHWM) before {} KiB, after {} KiB",
        TOTAL >> 20,
        secs,
        (TOTAL >> 20) as f64 / secs,
        rendered >> 20,
        before,
        peak_kib()
    );

    reset_peak();
    let before = peak_kib();
    let t = Instant::now();
    let bytes = supervised(dir.path());
    let secs = t.elapsed().as_secs_f64();
    println!(
        "supervised fake agent: {} MiB in {:.2}s = {:.0} MiB/s; peak RSS (VmHWM) before {} KiB, after {} KiB",
        bytes >> 20,
        secs,
        (bytes >> 20) as f64 / secs,
        before,
        peak_kib()
    );

    divan::main();
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn pipeline_100mib(bencher: Bencher) {
    let block = sample_block();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.log");
    bencher
        .counter(BytesCount::new(TOTAL))
        .bench_local(|| pipeline(&block, &path));
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn supervised_fake_agent_100mib(bencher: Bencher) {
    let dir = tempfile::tempdir().expect("temp dir");
    bencher
        .counter(BytesCount::new(TOTAL))
        .bench_local(|| supervised(dir.path()));
}

/// One pass over `TOTAL` bytes; returns how many bytes the renderer produced.
fn pipeline(block: &[u8], transcript: &Path) -> usize {
    let mut file = std::fs::File::create(transcript).expect("transcript");
    let mut splitter = LineSplitter::new(16 * 1024 * 1024);
    let mut parser = ClaudeParser::default();
    let mut events = Vec::new();
    let mut rendered = String::new();
    let mut rendered_bytes = 0usize;
    let mut fed = 0usize;
    while fed < TOTAL {
        let start = fed % block.len();
        let end = (start + CHUNK).min(block.len());
        splitter.feed(&block[start..end], |lines| {
            file.write_all(lines).expect("transcript write");
            parse_block(lines, &mut parser, &mut events);
        });
        fed += end - start;
        for event in events.drain(..) {
            write_event(&mut rendered, &event, true);
            rendered_bytes += rendered.len();
            rendered.clear();
        }
    }
    let rest = splitter.finish();
    parse_block(&rest, &mut parser, &mut events);
    parser.finish(&mut events);
    rendered_bytes
}

/// The fake agent floods 100 MiB through the real supervisor; the consumer
/// renders every event. Returns the transcript's size.
fn supervised(dir: &Path) -> usize {
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        json!({"default": ["flood:100", "complete"]}).to_string(),
    )
    .expect("script");
    let spec = CommandSpec {
        program: PathBuf::from(env!("CARGO_BIN_EXE_spectr-fake-agent")),
        args: vec![],
        env: vec![("SPECTR_FAKE_SCRIPT".into(), script.display().to_string())],
        cwd: dir.to_path_buf(),
        stdin: Some("Task ID: 1\n".into()),
        prompt: "Task ID: 1\n".into(),
        session_id: None,
        usage_file: None,
    };
    let transcript = dir.join("supervised.log");
    let opts = SuperviseOptions {
        attempt_timeout: Some(Duration::from_secs(600)),
        idle_timeout: None,
        result_grace: Duration::from_secs(10),
        kill_grace: Duration::from_secs(1),
        transcript: transcript.clone(),
    };
    let running = start(spec, AgentKind::Claude, opts).expect("start");
    let mut rendered = String::new();
    for event in running.events.iter() {
        match event {
            SupervisorEvent::Agents(batch) => {
                for e in &batch {
                    write_event(&mut rendered, e, true);
                    rendered.clear();
                }
            }
            SupervisorEvent::Exited(exit) => {
                assert!(
                    exit.signal.is_some(),
                    "the flood must end with its result: {:?}",
                    exit.ending
                );
            }
        }
    }
    std::fs::metadata(&transcript)
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

/// About 1 MiB of varied Claude output: multi-line assistant text, tool
/// calls, tool results, thinking, system lines, rate-limit notices.
fn sample_block() -> Vec<u8> {
    let mut out = Vec::with_capacity(1 << 20);
    let mut i = 0u64;
    let paragraph = "I looked at the failing test and the parser drops the last line when the input lacks a \
                     trailing newline; here is the fix, with a regression test. ";
    while out.len() < (1 << 20) {
        let lines = [
            json!({"type": "assistant", "message": {"id": format!("msg_{i}"), "type": "message", "role": "assistant",
                "model": "claude-sonnet", "content": [{"type": "text", "text": format!("Step {i}.\n{}\n\n- one\n- two\n{}", paragraph.repeat(4), paragraph.repeat(3))}],
                "usage": {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 0}},
                "session_id": "s", "parent_tool_use_id": null}),
            json!({"type": "assistant", "message": {"id": format!("msg_{i}"), "content": [{"type": "tool_use", "id": format!("t{i}"),
                "name": "Bash", "input": {"command": format!("cargo test -p spectr parser::case_{i} -- --nocapture"), "description": "run the test"}}]},
                "session_id": "s"}),
            json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{i}"),
                "content": format!("running 12 tests\n{}test result: ok. 12 passed; 0 failed\n", "test parser::case ... ok\n".repeat(40)),
                "is_error": false}]}, "session_id": "s"}),
            json!({"type": "assistant", "message": {"id": format!("msg_{i}b"), "content": [{"type": "thinking",
                "thinking": paragraph.repeat(2)}]}, "session_id": "s"}),
            json!({"type": "system", "subtype": "hook_started", "hook": "PostToolUse", "session_id": "s"}),
            json!({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resets_at": 1_760_000_000u64,
                "rate_limit_type": "five_hour", "utilization": 0.4}}),
        ];
        for l in lines {
            serde_json::to_writer(&mut out, &l).expect("json");
            out.push(b'\n');
        }
        i += 1;
    }
    out
}

/// Resets the kernel's peak-RSS mark (Linux: "5" to clear_refs), so each
/// pass reports its own peak.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
