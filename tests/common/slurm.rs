//! A private single-node Slurm cluster for a test: `munged`, `slurmctld`
//! and `slurmd` in the foreground, their state, sockets and logs in a
//! scratch folder, ports of their own; stopped (and waited for) on drop.
//! Skipped, saying so, where Debian's `slurm-wlm` and `munge` are missing or
//! cannot start (they need root); failing under `SPECTR_REQUIRE_SLURM=1`,
//! which `.ci/run` sets once it installed them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
    pub conf: PathBuf,
    /// The node's CPUs (the machine's).
    pub cpus: usize,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

fn skip(why: &str) -> Option<Cluster> {
    assert!(
        std::env::var("SPECTR_REQUIRE_SLURM").map_or(true, |v| v.is_empty()),
        "a Slurm cluster is required here (SPECTR_REQUIRE_SLURM) and {why}"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SLURM TEST SKIPPED ({}): {why} ***\n",
        std::thread::current().name().unwrap_or("?")
    );
    None
}

fn daemon(program: &str, args: &[&str], conf: &Path, log: &Path) -> std::io::Result<Child> {
    let out = std::fs::File::create(log)?;
    Command::new(program)
        .args(args)
        .env("SLURM_CONF", conf)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
}

impl Cluster {
    /// Starts one, or says why it cannot (None).
    pub fn start() -> Option<Cluster> {
        for program in ["munged", "slurmctld", "slurmd", "srun", "sinfo"] {
            if which::which(program).is_err() && !Path::new("/usr/sbin").join(program).exists() {
                return skip(&format!(
                    "{program} is not installed (apt-get install slurm-wlm munge)"
                ));
            }
        }
        if !nix::unistd::geteuid().is_root() {
            return skip("slurmd must run as root");
        }
        let dir = tempfile::tempdir().ok()?;
        let d = dir.path();
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(d.join(sub)).ok()?;
        }
        let key = d.join("munge.key");
        let mut bytes = [0u8; 1024];
        getrandom::fill(&mut bytes).ok()?;
        std::fs::write(&key, bytes).ok()?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).ok()?;
        let socket = d.join("munge.socket");
        let host = nix::unistd::gethostname().ok()?.into_string().ok()?;
        let host = host.split('.').next().unwrap_or(&host).to_owned();
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let conf = d.join("slurm.conf");
        let p = |name: &str| d.join(name).display().to_string();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=spectr{port}\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\nSlurmctldPort={port}\nSlurmdPort={dport}\n\
                 AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\n\
                 StateSaveLocation={state}\nSlurmdSpoolDir={spool}\nSlurmctldPidFile={cpid}\nSlurmdPidFile={dpid}\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
                 SchedulerType=sched/backfill\nReturnToService=2\nMpiDefault=none\n\
                 KillWait=10\nSlurmdTimeout=10\n\
                 NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\nPartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
                port = free_port(),
                dport = free_port(),
                sock = socket.display(),
                state = p("state"),
                spool = p("spool"),
                cpid = p("slurmctld.pid"),
                dpid = p("slurmd.pid"),
            ),
        )
        .ok()?;
        let mut cluster = Cluster {
            dir,
            daemons: Vec::new(),
            conf: conf.clone(),
            cpus,
        };
        let d = cluster.dir.path().to_path_buf();
        let started = [daemon(
            "munged",
            &[
                "-F",
                "--force",
                &format!("--socket={}", socket.display()),
                &format!("--key-file={}", key.display()),
                &format!("--pid-file={}", d.join("munged.pid").display()),
                &format!("--seed-file={}", d.join("munged.seed").display()),
                &format!("--log-file={}", d.join("munged.log").display()),
            ],
            &conf,
            &d.join("munged.out"),
        )];
        for s in started {
            match s {
                Ok(c) => cluster.daemons.push(c),
                Err(e) => return skip(&format!("munged cannot start: {e}")),
            }
        }
        let until = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            if Instant::now() > until {
                return skip("munged did not open its socket");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let conf_s = conf.display().to_string();
        for (program, log) in [("slurmctld", "slurmctld.log"), ("slurmd", "slurmd.log")] {
            match daemon(program, &["-D", "-f", &conf_s], &conf, &d.join(log)) {
                Ok(c) => cluster.daemons.push(c),
                Err(e) => return skip(&format!("{program} cannot start: {e}")),
            }
        }
        // Up once its node is idle.
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let out = Command::new("sinfo")
                .args(["-h", "-o", "%t"])
                .env("SLURM_CONF", &conf)
                .output();
            if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle") {
                return Some(cluster);
            }
            if Instant::now() > until {
                let logs = ["slurmctld.log", "slurmd.log"]
                    .map(|l| std::fs::read_to_string(d.join(l)).unwrap_or_default())
                    .join("\n");
                return skip(&format!("the cluster did not come up:\n{logs}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The node's name (the host's short name).
    pub fn node(&self) -> String {
        let out = Command::new("sinfo")
            .args(["-h", "-o", "%N"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .expect("sinfo runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The node's state as `sinfo` says it (`idle`, `mix`, `down*`, ...).
    pub fn node_state(&self) -> String {
        let out = Command::new("sinfo")
            .args(["-h", "-o", "%t"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .expect("sinfo runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `scontrol` with `args`; panics unless it succeeds.
    pub fn scontrol(&self, args: &[&str]) {
        assert!(self.scontrol_ok(args), "scontrol {args:?}");
    }

    /// `scontrol` with `args`: whether it succeeded.
    pub fn scontrol_ok(&self, args: &[&str]) -> bool {
        Command::new("scontrol")
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .status()
            .is_ok_and(|s| s.success())
    }

    /// kill -9 of the node's slurmd (the test's own child), as a crash of
    /// the node's daemon: its jobs' steps live on without it.
    pub fn kill_slurmd(&mut self) {
        let mut d = self.daemons.pop().expect("slurmd runs");
        let _ = d.kill();
        let _ = d.wait();
    }

    /// Starts the node's slurmd again (after [`Cluster::kill_slurmd`]): it
    /// ends the steps of jobs its controller gave up, and the node returns.
    pub fn restart_slurmd(&mut self) {
        let d = self.dir.path().to_path_buf();
        let conf = self.conf.display().to_string();
        let child = daemon(
            "slurmd",
            &["-D", "-f", &conf],
            &self.conf,
            &d.join("slurmd-2.log"),
        )
        .expect("slurmd starts again");
        self.daemons.push(child);
    }

    /// The jobs the cluster knows of now (squeue).
    pub fn jobs(&self) -> Vec<String> {
        Command::new("squeue")
            .args(["-h", "-o", "%i %T"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Processes (pids) whose environment names `state` (a fixture's state
/// folder, which its runs, workers and agents all inherit): none may be
/// left once a run is over.
pub fn processes_of(state: &Path) -> Vec<i32> {
    let needle = format!("SPECTR_FAKE_STATE={}", state.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &i32| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        })
        .collect();
    pids.sort();
    pids
}

/// Waits (a hang guard of 60 s, nothing timed) until no process of `state`
/// is left; the ones left then, if any.
pub fn wait_for_none_of(state: &Path) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let left = processes_of(state);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The daemons are this test's own children: stopped, then waited for.
        for c in self.daemons.iter_mut().rev() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        for c in self.daemons.iter_mut().rev() {
            let until = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() {
                if Instant::now() > until {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
