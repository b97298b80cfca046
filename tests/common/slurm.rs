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
