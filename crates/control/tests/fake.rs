//! The control crate against fake sysfs trees: state parsing, refusals, and the guard's
//! and guardian's restores (writes go to files in the tree).

use std::fs;
use std::path::{Path, PathBuf};

use smtlab_control::guard::Protection;
use smtlab_control::guardian::{Guardian, Plan};
use smtlab_control::{ControlError, SmtControl, SmtSwitch, Sysfs};

/// A tree with `cores` of two siblings each (CPU i and i+1), SMT control `control`.
fn tree(control: Option<&str>, cores: u32) -> (tempfile::TempDir, Sysfs) {
    let dir = smtlab_fixtures::sysfs::smt_tree(control, cores);
    let sysfs = Sysfs::at(dir.path());
    (dir, sysfs)
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap().trim().to_string()
}

fn online(sysfs: &Sysfs, cpu: u32) -> String {
    read(&sysfs.online_path(cpu))
}

const QUIET: Protection = Protection {
    guardian: false,
    signals: false,
};

#[test]
fn state_groups_online_siblings_by_core() {
    let (_d, sysfs) = tree(Some("on"), 2);
    fs::write(sysfs.online_path(3), "0\n").unwrap();
    let s = smtlab_control::state::read(&sysfs).unwrap();
    assert_eq!(s.control, Some(SmtControl::On));
    assert_eq!(s.active, Some(true));
    assert_eq!(s.online, vec![0, 1, 2]);
    assert_eq!(s.offline(), vec![3]);
    assert_eq!(s.hotpluggable, vec![1, 2, 3]);
    let cores: Vec<Vec<u32>> = s.cores.iter().map(|c| c.cpus.clone()).collect();
    assert_eq!(cores, vec![vec![0, 1], vec![2]]);
    assert_eq!(s.threads_per_core(), Some((1, 2)));
}

#[test]
fn a_broken_online_file_names_the_file() {
    let (_d, sysfs) = tree(Some("on"), 1);
    fs::write(sysfs.online_path(1), "yes\n").unwrap();
    let e = smtlab_control::state::read(&sysfs).unwrap_err().to_string();
    assert!(
        e.contains("cpu1/online") && e.contains("expected 0 or 1"),
        "{e}"
    );
}

#[test]
fn states_that_cannot_be_switched_say_which() {
    for (control, word) in [
        ("notsupported", "notsupported"),
        ("forceoff", "forceoff"),
        ("notimplemented", "notimplemented"),
        ("weird", "\"weird\""),
    ] {
        let (_d, sysfs) = tree(Some(control), 1);
        let mut s = SmtSwitch::with_protection(sysfs.clone(), QUIET).unwrap();
        let e = s.set(false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(word) && !text.contains('\n'), "{text}");
        assert_eq!(read(&sysfs.control_path()), control);
    }
    let (_d, sysfs) = tree(None, 1);
    let mut s = SmtSwitch::with_protection(sysfs, QUIET).unwrap();
    assert!(matches!(s.set(false), Err(ControlError::NoControl { .. })));
}

#[test]
fn not_root_is_refused_before_any_write() {
    let (_d, sysfs) = tree(Some("on"), 2);
    let user = sysfs.clone().as_user(1000);
    let mut s = SmtSwitch::with_protection(user.clone(), QUIET).unwrap();
    let e = s.set(false).unwrap_err().to_string();
    assert!(e.contains("needs root"), "{e}");
    let e = s.offline_all_but(0).unwrap_err().to_string();
    assert!(e.contains("needs root"), "{e}");
    assert_eq!(read(&sysfs.control_path()), "on");
    assert_eq!(online(&sysfs, 1), "1");
}

#[test]
fn switching_to_the_current_state_writes_nothing() {
    let (_d, sysfs) = tree(Some("on"), 1);
    // A read-only file would make any write fail: none must be tried.
    let mut s = SmtSwitch::with_protection(sysfs.clone().as_user(1000), QUIET).unwrap();
    s.set(true).unwrap();
}

#[test]
fn the_guard_restores_smt_and_cpus_when_dropped() {
    let (_d, sysfs) = tree(Some("on"), 2);
    fs::write(sysfs.online_path(3), "0\n").unwrap();
    {
        let mut s = SmtSwitch::with_protection(sysfs.clone(), QUIET).unwrap();
        s.set(false).unwrap();
        assert_eq!(read(&sysfs.control_path()), "off");
        s.set(true).unwrap();
        s.set(false).unwrap();
        let taken = s.offline_all_but(0).unwrap();
        assert_eq!(taken, vec![1, 2]);
        assert_eq!(
            (online(&sysfs, 1), online(&sysfs, 2)),
            ("0".into(), "0".into())
        );
        // The fake kernel does not bring CPUs back on `on`; make CPU 3 online as the
        // real one would, to see the guard take it offline again.
        fs::write(sysfs.online_path(3), "1\n").unwrap();
    }
    assert_eq!(read(&sysfs.control_path()), "on");
    assert_eq!(online(&sysfs, 1), "1");
    assert_eq!(online(&sysfs, 2), "1");
    assert_eq!(online(&sysfs, 3), "0", "a CPU offline before stays offline");
}

#[test]
fn the_guard_restores_on_unwinding() {
    let (_d, sysfs) = tree(Some("on"), 1);
    let s2 = sysfs.clone();
    let r = std::panic::catch_unwind(move || {
        let mut s = SmtSwitch::with_protection(s2, QUIET).unwrap();
        s.set(false).unwrap();
        panic!("a benchmark failed");
    });
    assert!(r.is_err());
    assert_eq!(read(&sysfs.control_path()), "on");
}

#[test]
fn restore_reports_what_it_could_not_put_back() {
    let (_d, sysfs) = tree(Some("on"), 1);
    let mut s = SmtSwitch::with_protection(sysfs.clone(), QUIET).unwrap();
    s.set(false).unwrap();
    // A directory where the file was: the write must fail.
    fs::remove_file(sysfs.control_path()).unwrap();
    fs::create_dir(sysfs.control_path()).unwrap();
    let e = s.restore().unwrap_err().to_string();
    assert!(
        e.contains("could not restore") && e.contains("smt/control"),
        "{e}"
    );
    fs::remove_dir(sysfs.control_path()).unwrap();
    fs::write(sysfs.control_path(), "off").unwrap();
    s.finish().unwrap();
    assert_eq!(read(&sysfs.control_path()), "on");
}

#[test]
fn a_cpu_without_hotplug_stops_the_uniprocessor_before_any_write() {
    let (_d, sysfs) = tree(Some("on"), 2);
    let mut s = SmtSwitch::with_protection(sysfs.clone(), QUIET).unwrap();
    let e = s.offline_all_but(2).unwrap_err().to_string();
    assert!(e.contains("CPU 0") && e.contains("cpu0/online"), "{e}");
    assert_eq!(online(&sysfs, 1), "1");
    fs::write(sysfs.online_path(3), "0\n").unwrap();
    let e = s.offline_all_but(3).unwrap_err().to_string();
    assert!(e.contains("CPU 3 is not online"), "{e}");
}

#[test]
fn uniprocessor_keeps_one_cpu_and_restores() {
    let (_d, sysfs) = tree(Some("on"), 2);
    let up = smtlab_control::uniprocessor(sysfs.clone(), 0);
    // The default protection starts a guardian and a signal watcher: both must end
    // quietly here.
    let up = up.unwrap();
    assert!(up.guardian_pid().is_some());
    for c in 1..4 {
        assert_eq!(online(&sysfs, c), "0");
    }
    up.finish().unwrap();
    for c in 1..4 {
        assert_eq!(online(&sysfs, c), "1");
    }
}

fn plan_for(paths: &[(PathBuf, &str)]) -> Plan {
    let mut plan = Plan::default();
    for (p, v) in paths {
        plan.push(p, v);
    }
    plan
}

#[test]
fn the_guardian_restores_when_its_pipe_closes_without_a_word() {
    let (_d, sysfs) = tree(Some("on"), 1);
    let plan = plan_for(&[(sysfs.control_path(), "on"), (sysfs.online_path(1), "1")]);
    let g = Guardian::spawn(&plan).unwrap();
    fs::write(sysfs.control_path(), "off").unwrap();
    fs::write(sysfs.online_path(1), "0").unwrap();
    g.abandon();
    assert_eq!(read(&sysfs.control_path()), "on");
    assert_eq!(online(&sysfs, 1), "1");
}

/// A process group of its own running `sleep`, for the guardian to kill or leave.
fn sleeper() -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap()
}

#[test]
fn an_abandoned_guardian_kills_the_groups_it_tracks_and_only_those() {
    use std::os::unix::process::ExitStatusExt;
    let (_d, sysfs) = tree(Some("on"), 1);
    let plan = plan_for(&[(sysfs.control_path(), "on")]);
    let g = Guardian::spawn(&plan).unwrap();
    let (mut tracked, mut forgotten) = (sleeper(), sleeper());
    g.track_group(tracked.id() as i32);
    g.track_group(forgotten.id() as i32);
    g.untrack_group(forgotten.id() as i32);
    fs::write(sysfs.control_path(), "off").unwrap();
    g.abandon();
    let status = smtlab_fixtures::bounded::wait(&mut tracked, "the tracked sleeper");
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert_eq!(
        forgotten.try_wait().unwrap(),
        None,
        "the untracked group was killed"
    );
    assert_eq!(read(&sysfs.control_path()), "on");
    forgotten.kill().unwrap();
    forgotten.wait().unwrap();
}

#[test]
fn a_dismissed_guardian_writes_nothing() {
    let (_d, sysfs) = tree(Some("on"), 1);
    let plan = plan_for(&[(sysfs.control_path(), "on")]);
    let g = Guardian::spawn(&plan).unwrap();
    fs::write(sysfs.control_path(), "off").unwrap();
    g.dismiss();
    assert_eq!(read(&sysfs.control_path()), "off");
}

#[test]
fn an_emulating_tree_does_what_the_kernel_does_on_smt_control_and_hotplug() {
    let dir = smtlab_fixtures::sysfs::smt_tree(Some("on"), 2);
    let sysfs = Sysfs::emulating_kernel(dir.path());
    let active = || read(&sysfs.active_path());
    let mut switch = SmtSwitch::with_protection(sysfs.clone(), QUIET).unwrap();
    switch.set(false).unwrap();
    assert_eq!(
        (online(&sysfs, 1), online(&sysfs, 2), online(&sysfs, 3)),
        ("0".into(), "1".into(), "0".into())
    );
    assert_eq!(active(), "0");
    let s = smtlab_control::state::read(&sysfs).unwrap();
    assert_eq!(s.online, vec![0, 2]);
    // SMT off keeps secondary threads offline, as the kernel does.
    let e = sysfs
        .write("bringing CPU 1 online", &sysfs.online_path(1), "1")
        .unwrap_err();
    assert!(e.to_string().contains("cpu1/online"), "{e}");
    switch.set(true).unwrap();
    assert_eq!(
        (online(&sysfs, 1), online(&sysfs, 3)),
        ("1".into(), "1".into())
    );
    assert_eq!(active(), "1");
    switch.offline_all_but(0).unwrap();
    assert_eq!(smtlab_control::state::read(&sysfs).unwrap().online, vec![0]);
    assert_eq!(active(), "0");
    switch.finish().unwrap();
    assert_eq!(
        smtlab_control::state::read(&sysfs).unwrap().online,
        vec![0, 1, 2, 3]
    );
    assert_eq!(active(), "1");
    // A plain tree only changes the file written.
    let (_d, plain) = tree(Some("on"), 1);
    plain.write("x", &plain.control_path(), "off").unwrap();
    assert_eq!(online(&plain, 1), "1");
}

#[test]
fn switch_refusal_says_why_or_nothing() {
    let (_d, sysfs) = tree(Some("on"), 1);
    assert_eq!(smtlab_control::switch_refusal(&sysfs), None);
    let not_root = sysfs.clone().as_user(1000);
    assert!(smtlab_control::switch_refusal(&not_root).is_some_and(|w| w.contains("root")));
    let (_d, none) = tree(None, 1);
    assert!(smtlab_control::switch_refusal(&none).is_some_and(|w| w.contains("smt/control")));
    let (_d, ns) = tree(Some("notsupported"), 1);
    assert!(smtlab_control::switch_refusal(&ns).is_some_and(|w| w.contains("notsupported")));
}

#[test]
fn an_emulating_tree_keeps_a_journal_of_the_writes_it_took() {
    let dir = smtlab_fixtures::sysfs::smt_tree(Some("on"), 1);
    let sysfs = Sysfs::emulating_kernel(dir.path());
    let mut switch = SmtSwitch::with_protection(sysfs.clone(), QUIET).unwrap();
    switch.offline_all_but(0).unwrap();
    switch.finish().unwrap();
    let journal = fs::read_to_string(dir.path().join(smtlab_control::emulation::JOURNAL)).unwrap();
    assert_eq!(
        journal,
        "sys/devices/system/cpu/cpu1/online 0\nsys/devices/system/cpu/cpu1/online 1\n"
    );
}
