//! Runs the `nvshmem-run` binary with shell stand-ins for PE programs (no GPU needed).
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

fn launcher() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nvshmem-run"));
    c.env_remove("CUDA_VISIBLE_DEVICES");
    c
}

fn sh(n: usize, script: &str) -> Output {
    launcher()
        .args(["-n", &n.to_string(), "--", "sh", "-c", script])
        .output()
        .expect("running nvshmem-run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvshmem-run-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether the process is still alive (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        }
        Err(_) => false,
    }
}

fn pids_in(dir: &Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn all_succeed_and_every_line_is_prefixed() {
    let out = sh(3, "echo out $RANK; echo second; echo err $RANK >&2");
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    for pe in 0..3 {
        assert!(
            stdout.contains(&format!("[PE {pe}] out {pe}\n")),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("[PE {pe}] second\n")), "{stdout}");
        assert!(
            stderr.contains(&format!("[PE {pe}] err {pe}\n")),
            "{stderr}"
        );
        assert!(
            !stdout.contains(&format!("err {pe}")),
            "stderr leaked to stdout"
        );
    }
    assert_eq!(stdout.lines().count(), 6);
    assert!(stdout.lines().all(|l| l.starts_with("[PE ")));
}

#[test]
fn each_pe_sees_its_environment() {
    let out = launcher()
        .args(["-n", "2", "--port", "29555", "sh", "-c"])
        .arg(
            "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK \
             LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT \
             BOOT=$NVSHMEM_RS_BOOTSTRAP NVLS=$NVSHMEM_DISABLE_NVLS NCCL=$NCCL_NVLS_ENABLE",
        )
        .env("NVSHMEM_DISABLE_NVLS", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    for pe in 0..2 {
        let want = format!(
            "[PE {pe}] RANK={pe} WORLD_SIZE=2 LOCAL_RANK={pe} LOCAL_WORLD_SIZE=2 \
             MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 BOOT=env NVLS=1 NCCL=0"
        );
        assert!(stdout.lines().any(|l| l == want), "{stdout}");
    }
}

#[test]
fn a_free_port_is_chosen_and_shared() {
    let out = sh(2, "echo port $MASTER_PORT");
    let stdout = text(&out.stdout);
    let ports: Vec<&str> = stdout
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[0], ports[1]);
    assert!(ports[0].parse::<u16>().unwrap() > 0);
}

#[test]
fn one_failing_pe_ends_the_others_quickly() {
    let dir = scratch("fail");
    let script = format!(
        "sleep 30 & echo $! > {d}/bg.$RANK; \
         if [ $RANK = 1 ]; then sleep 0.3; exit 3; fi; exec sleep 30",
        d = dir.display()
    );
    let start = Instant::now();
    let out = sh(3, &script);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("PE 1 exited with status 3"), "{stderr}");
    // Neither the PEs' own sleeps nor what they started in the background survive.
    std::thread::sleep(Duration::from_millis(200));
    let pids = pids_in(&dir);
    assert_eq!(pids.len(), 3);
    for pid in pids {
        assert!(!alive(pid), "background sleep {pid} survived");
    }
    assert!(!any_sleep_of(&script), "a PE's sleep survived");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether a process running `sleep 30` whose parent chain came from this script remains:
/// checked through the PE processes' command lines, which hold the unique script text.
fn any_sleep_of(script: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let pid: u32 = e.file_name().to_string_lossy().parse().unwrap_or(0);
        pid != 0 && alive(pid) && text(&cmdline).contains(script)
    })
}

#[test]
fn a_pe_killed_by_a_signal_is_reported() {
    let out = sh(2, "if [ $RANK = 0 ]; then kill -KILL $$; fi; sleep 30");
    assert_eq!(out.status.code(), Some(128 + 9), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("PE 0 was killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
}

#[test]
fn a_panicking_pe_exits_101() {
    let out = sh(2, "if [ $RANK = 1 ]; then exit 101; fi; sleep 30");
    assert_eq!(out.status.code(), Some(101));
    assert!(text(&out.stderr).contains("PE 1 exited with status 101"));
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let out = launcher()
        .args(["-n", "2", "/nonexistent/program-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cannot start"), "{stderr}");
    assert!(stderr.contains("program-xyz"), "{stderr}");
}

#[test]
fn gpus_counted_from_cuda_visible_devices() {
    let out = launcher()
        .env("CUDA_VISIBLE_DEVICES", "0,1,2")
        .args(["sh", "-c", "echo $WORLD_SIZE"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout).lines().count(), 3);
    assert!(text(&out.stdout).lines().all(|l| l.ends_with("] 3")));
}

#[test]
fn no_gpu_and_no_n_is_an_error() {
    let out = launcher()
        .env("CUDA_VISIBLE_DEVICES", "")
        .args(["sh", "-c", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("-n N"));
}

#[test]
fn sigterm_to_the_launcher_ends_the_pes() {
    let dir = scratch("term");
    let script = format!("echo $$ > {}/pe.$RANK; exec sleep 30", dir.display());
    let mut child = launcher()
        .args(["-n", "2", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_dir(&dir).unwrap().count() < 2 && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    // kill(1) rather than libc keeps the test free of unsafe code.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert!(start.elapsed() < Duration::from_secs(10));
    for pid in pids_in(&dir) {
        assert!(!alive(pid), "PE {pid} survived");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
