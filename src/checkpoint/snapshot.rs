//! Taking snapshots with a temporary index: the user's index, HEAD, branches
//! and stash are only read.

use super::error::CheckpointError;
use super::exclude::{self, literal_pathspec};
use super::kept::Kept;
use super::meta::Meta;
use super::temp_index::{TempIndex, contains};
use super::{Checkpoint, Checkpointer, index_file, tree_io};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Untracked files above this size are named in a notice.
const LARGE_FILE: u64 = 50_000_000;

/// HEAD as found: its commit (none before the first commit) and branch (none
/// when detached).
pub(crate) struct HeadState {
    pub(crate) commit: Option<String>,
    pub(crate) branch: Option<String>,
}

/// The stash, whether a ref asked about exists, and the branches and tags.
type Listed = (Option<String>, bool, BTreeMap<String, String>);

/// HEAD, the stash and every branch and tag, as git's ref files say (or
/// one `for-each-ref` where they cannot say it plainly).
pub(crate) struct RefsNow {
    pub(crate) head: HeadState,
    pub(crate) stash: Option<String>,
    /// Whether the ref asked about exists.
    pub(crate) existed: bool,
    /// `refs/heads/*` and `refs/tags/*`: name -> object id.
    pub(crate) tips: BTreeMap<String, String>,
}

impl Checkpointer {
    /// Snapshots the work tree under `refname` and records HEAD, the user's
    /// index and stash, so [`Checkpointer::revert`] can put them all back.
    ///
    /// Three git commands in the usual case (add, write-tree, update-ref:
    /// HEAD, the stash, branches and tags are read from git's ref files,
    /// the commit and the index copy written without git, where they can
    /// be); the user's index is stored only when it changed since the last
    /// checkpoint of this run.
    ///
    /// An attempt's checkpoint right after a task commit reuses the
    /// commit's snapshot when it still stands ([`super::kept`]).
    pub fn create(&self, refname: &str) -> Result<Checkpoint, CheckpointError> {
        let kept = self.take_kept().and_then(|k| self.brought_up_to_date(k));
        self.create_from(refname, kept).map(|(cp, _, _)| cp)
    }

    /// [`Checkpointer::create`], also returning the snapshot's tree and
    /// metadata (a merge-back needs both). Always a fresh snapshot.
    pub(crate) fn create_with_tree(
        &self,
        refname: &str,
    ) -> Result<(Checkpoint, String, Meta), CheckpointError> {
        self.forget_kept();
        self.create_from(refname, None)
    }

    fn create_from(
        &self,
        refname: &str,
        kept: Option<Kept>,
    ) -> Result<(Checkpoint, String, Meta), CheckpointError> {
        check_refname(refname)?;
        self.check_no_operation_in_progress()?;
        self.clean_stale_temp_dirs();
        // Deleted in this checkpoint's transaction (not by `settle`).
        let doomed = self.take_doomed();
        self.settle();
        let (user_index, written) = self.read_user_index_dated()?;
        let store_index = || {
            user_index
                .as_deref()
                .map(|b| self.store_user_index(b))
                .transpose()
        };
        let mut meta = Meta::new();
        let mut notices = Vec::new();
        let (probed, tree, stored, nested) = match kept {
            Some(k) => {
                let (probed, stored) = self.probe_beside_blob(refname, &store_index);
                self.kept_meta(
                    k.meta,
                    &k.tmp.path,
                    user_index.as_deref(),
                    &mut meta,
                    &mut notices,
                );
                (probed?, k.tree, Some(stored?), k.nested)
            }
            None => {
                let (probed, tree, nested) = self.fresh_snapshot(
                    refname,
                    user_index.as_deref(),
                    written,
                    &mut meta,
                    &mut notices,
                )?;
                (probed, tree, None, nested)
            }
        };
        let RefsNow {
            head,
            stash,
            existed,
            tips,
            ..
        } = probed;
        if !nested.is_empty() {
            notices.insert(0, nested_notice(&nested));
        }
        meta.stash = stash;
        meta.stash_log = self.read_stash_log()?;
        meta.tips = Some(tips);

        let mut message = format!(
            "spectr ralph: checkpoint\n\nref: {refname}\nnonce: {}\n",
            uuid::Uuid::new_v4().simple()
        );
        meta.write_to(&mut message);
        let parents: Vec<String> = head.commit.iter().cloned().collect();
        let (index, commit) = match stored {
            Some(index) => (index, self.commit_tree(&tree, &parents, &message)?),
            None => {
                let (index, commit) =
                    both(store_index, || self.commit_tree(&tree, &parents, &message));
                (index?, commit?)
            }
        };

        let index_ref = Checkpointer::index_ref_name(refname);
        let mut script = format!("update {refname} {commit}\n");
        match &index {
            Some(blob) => {
                let keeper = self.index_keeper(blob);
                script.push_str(&format!("update {index_ref} {keeper}\n"));
            }
            None => script.push_str(&format!("delete {index_ref}\n")),
        }
        let stash_prefix = Checkpointer::stash_refs_prefix(refname);
        let stash_commits = Checkpointer::stash_commits(&meta);
        for (i, c) in stash_commits.iter().enumerate() {
            script.push_str(&format!("update {stash_prefix}{i} {c}\n"));
        }
        let update = |script: String| {
            self.git
                .cmd(["update-ref", "-m", "spectr ralph: checkpoint", "--stdin"])
                .stdin(script.into_bytes())
                .run()
        };
        // A ref this transaction writes is not also deleted in it.
        let doomed: Vec<String> = doomed
            .into_iter()
            .filter(|d| {
                let name = d.split(' ').next().unwrap_or(d);
                !script.lines().any(|l| l.split(' ').nth(1) == Some(name))
            })
            .collect();
        let deletions: String = doomed.iter().map(|d| format!("delete {d}\n")).collect();
        let stored = match doomed.is_empty() {
            true => update(script),
            false => update(format!("{script}{deletions}")).or_else(|_| {
                // One of them failed it: the checkpoint alone, then those.
                let stored = update(script);
                self.delete_doomed_alone(&doomed);
                stored
            }),
        };
        if let Err(e) = stored {
            // A cached index blob may have been pruned: forget it.
            if let Ok(mut cache) = self.shared.index_blob.lock() {
                *cache = None;
            }
            return Err(e);
        }

        // A ref that did not exist has no stash refs left from before: its
        // drop can name every ref it deletes without listing them.
        self.remember_created(refname, &commit, (!existed).then_some(stash_commits.len()));
        let cp = Checkpoint {
            refname: refname.to_owned(),
            commit,
            head: head.commit,
            branch: head.branch,
            index,
            tree: Some(tree.clone()),
            notices,
        };
        Ok((cp, tree, meta))
    }

    /// A kept snapshot's case: HEAD and the stash beside the user's index
    /// blob (the snapshot is there already).
    fn probe_beside_blob(
        &self,
        refname: &str,
        store_index: &(dyn Fn() -> Result<Option<String>, CheckpointError> + Sync),
    ) -> (
        Result<RefsNow, CheckpointError>,
        Result<Option<String>, CheckpointError>,
    ) {
        both(|| self.head_stash_and_ref(Some(refname)), store_index)
    }

    /// A kept snapshot's metadata: collected while its commit was made, or
    /// now if that could not be.
    fn kept_meta(
        &self,
        collected: Option<std::thread::JoinHandle<(Meta, Vec<String>)>>,
        tmp: &std::path::Path,
        user_index: Option<&[u8]>,
        meta: &mut Meta,
        notices: &mut Vec<String>,
    ) {
        match collected.and_then(|m| m.join().ok()) {
            Some((m, n)) => (*meta, *notices) = (m, n),
            None => self.collect_file_meta(tmp, user_index, meta, notices),
        }
    }

    /// A snapshot taken now, side by side where steps are independent
    /// (each git command mostly waits on its start or on the disk): HEAD and
    /// the stash beside `git add`, the metadata beside `git write-tree`.
    fn fresh_snapshot(
        &self,
        refname: &str,
        user_index: Option<&[u8]>,
        written: Option<u64>,
        meta: &mut Meta,
        notices: &mut Vec<String>,
    ) -> Result<(RefsNow, String, Vec<String>), CheckpointError> {
        let (probed, snapshot) = both(
            || self.head_stash_and_ref(Some(refname)),
            || self.snapshot_index(user_index, written),
        );
        let (tmp, nested) = snapshot?;
        let (tree, ()) = both(
            || self.write_tree(&tmp),
            // Reads the index `git write-tree` may replace (atomically, with
            // the same entries plus cached trees): either version will do.
            || self.collect_file_meta(&tmp.path, user_index, meta, notices),
        );
        Ok((probed?, tree?, nested))
    }

    /// The work tree's content as a tree id, by the rules of
    /// [`Checkpointer::create`] (tracked and untracked non-ignored files,
    /// excluded paths left out, raw bytes), without a commit or a ref.
    pub fn snapshot_tree(&self) -> Result<String, CheckpointError> {
        self.clean_stale_temp_dirs();
        let (user_index, written) = self.read_user_index_dated()?;
        let (tmp, _nested) = self.snapshot_index(user_index.as_deref(), written)?;
        self.write_tree(&tmp)
    }

    /// [`Checkpointer::snapshot_tree`], kept for the next
    /// [`Checkpointer::create`] as long as the files of `guard` (those
    /// spectr may write in between) stay as they are now.
    pub fn snapshot_tree_for_next(&self, guard: &[PathBuf]) -> Result<String, CheckpointError> {
        self.forget_kept();
        let stamps = Kept::stamps(guard);
        self.clean_stale_temp_dirs();
        let (user_index, written) = self.read_user_index_dated()?;
        let (tmp, nested) = self.snapshot_index(user_index.as_deref(), written)?;
        let seed = user_index.as_deref().map(|b| (b.len() as u64, digest(b)));
        // The next checkpoint's metadata, collected beside `git write-tree`
        // (either version of the index it may replace will do) and the
        // commit's making.
        let (cp, path) = (self.clone(), tmp.path.clone());
        let meta = std::thread::Builder::new()
            .name("checkpoint-meta".into())
            .spawn(move || {
                let (mut meta, mut notices) = (Meta::new(), Vec::new());
                cp.collect_file_meta(&path, user_index.as_deref(), &mut meta, &mut notices);
                (meta, notices)
            })
            .ok();
        let tree = self.write_tree(&tmp)?;
        if let Ok(mut kept) = self.shared.kept.lock() {
            *kept = Some(Kept::new(tmp, tree.clone(), nested, stamps, meta, seed));
        }
        Ok(tree)
    }

    /// The kept snapshot with the guarded files written since added again;
    /// `None` when it cannot stand for the tree (too old, or a guarded file
    /// it does not hold).
    fn brought_up_to_date(&self, mut kept: Kept) -> Option<Kept> {
        if !kept.young() {
            return None;
        }
        let changed = kept.changed();
        if changed.is_empty() {
            return Some(kept);
        }
        let bytes = std::fs::read(&kept.tmp.path).ok()?;
        let entries = index_file::entries(&bytes, self.hash_len)?;
        let mut paths = Vec::new();
        for path in &changed {
            let rel = exclude::repo_relative(&self.root, path)?;
            let held = entries
                .iter()
                .any(|e| e.path == rel.as_os_str().as_encoded_bytes());
            if !held {
                return None;
            }
            paths.push(literal_pathspec(&rel));
        }
        self.git
            .cmd(["add", "-A", "--"])
            .args(paths)
            .index(&kept.tmp.path)
            .run()
            .ok()?;
        kept.tree = self.write_tree(&kept.tmp).ok()?;
        // The metadata collected meanwhile is of the files as they were
        // (a rewrite may change a mode): collected again.
        kept.meta = None;
        Some(kept)
    }

    fn take_kept(&self) -> Option<Kept> {
        self.shared.kept.lock().ok()?.take()
    }

    /// The kept snapshot no longer stands: the tree is about to change.
    pub(crate) fn forget_kept(&self) {
        drop(self.take_kept());
    }

    /// A temporary index seeded with `user_index` holding the snapshot
    /// (`git add -A` minus the excluded paths), and the nested repositories
    /// left out.
    pub(crate) fn snapshot_index(
        &self,
        user_index: Option<&[u8]>,
        written: Option<u64>,
    ) -> Result<(TempIndex, Vec<String>), CheckpointError> {
        let tmp = self.temp_index_dated(user_index, written)?;
        let nested = self.add_all(&tmp)?;
        self.drop_excluded(&tmp)?;
        Ok((tmp, nested))
    }

    /// Takes spectr's own paths out of `tmp` after `git add -A`. They are
    /// not kept out by an exclude pathspec: `git add` fails on a pathspec
    /// naming a path the user's `.gitignore` ignores (and people ignore
    /// `.ralph/`). Normally nothing is there to take out (`.ralph/` ignores
    /// itself, the session file is in `info/exclude`), so this costs one
    /// read of the index and no git command.
    fn drop_excluded(&self, tmp: &TempIndex) -> Result<(), CheckpointError> {
        if self.excludes.is_empty() {
            return Ok(());
        }
        let bytes = match std::fs::read(&tmp.path) {
            Ok(b) => b,
            // An empty work tree leaves no index file: nothing to take out.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(CheckpointError::io("cannot read", &tmp.path, e)),
        };
        if !index_file::holds_any(&bytes, self.hash_len, &self.excludes) {
            return Ok(());
        }
        self.git
            .cmd(["rm", "--cached", "-r", "-f", "-q", "--ignore-unmatch", "--"])
            .args(self.excludes.iter().map(|p| literal_pathspec(p)))
            .index(&tmp.path)
            .run()?;
        Ok(())
    }

    /// HEAD (commit and branch), `refs/stash`, and every branch and tag,
    /// with one git command.
    pub(crate) fn head_and_stash(&self) -> Result<RefsNow, CheckpointError> {
        self.head_stash_and_ref(None)
    }

    /// [`Checkpointer::head_and_stash`], and whether `refname` exists, in
    /// the same git command (`for-each-ref`; HEAD's commit is its branch's
    /// tip, or the commit a detached HEAD's file names).
    fn head_stash_and_ref(&self, refname: Option<&str>) -> Result<RefsNow, CheckpointError> {
        let mut names = vec!["refs/stash"];
        names.extend(refname);
        let (stash, existed, tips) = match super::ref_files::read_refs(
            &self.common_dir,
            &["refs/heads/", "refs/tags/"],
            &names,
        ) {
            Some(mut refs) => {
                let existed = refname.is_some_and(|r| refs.remove(r).is_some());
                (refs.remove("refs/stash"), existed, refs)
            }
            None => self.refs_by_git(refname)?,
        };
        let head = self.head_from_file(&tips)?;
        Ok(RefsNow {
            head,
            stash,
            existed,
            tips,
        })
    }

    /// [`Checkpointer::head_stash_and_ref`]'s refs as `git for-each-ref`
    /// lists them: the stash, whether `refname` exists, the tips.
    fn refs_by_git(&self, refname: Option<&str>) -> Result<Listed, CheckpointError> {
        let out = self
            .git
            .cmd([
                "for-each-ref",
                "--format=%(objectname) %(refname)",
                "refs/heads/",
                "refs/tags/",
                "refs/stash",
            ])
            .args(refname)
            .run()?;
        let text = String::from_utf8_lossy(&out);
        let (mut stash, mut existed) = (None, false);
        let mut tips = BTreeMap::new();
        for line in text.lines() {
            let Some((oid, name)) = line.split_once(' ') else {
                continue;
            };
            if Some(name) == refname {
                existed = true;
            } else if name == "refs/stash" {
                stash = Some(oid.to_owned());
            } else {
                tips.insert(name.to_owned(), oid.to_owned());
            }
        }
        Ok((stash, existed, tips))
    }

    /// HEAD from its file, its commit from `tips` (reftable: git says).
    fn head_from_file(
        &self,
        tips: &BTreeMap<String, String>,
    ) -> Result<HeadState, CheckpointError> {
        Ok(match std::fs::read_to_string(self.git_dir.join("HEAD")) {
            Ok(text) if !text.starts_with("ref: refs/heads/.invalid") => {
                let text = text.trim_end();
                match text.strip_prefix("ref: ") {
                    Some(branch) if branch.starts_with("refs/heads/") => HeadState {
                        // None: the branch is not born yet.
                        commit: tips.get(branch).cloned(),
                        branch: Some(branch.to_owned()),
                    },
                    None if is_object_id(text) => HeadState {
                        commit: Some(text.to_owned()),
                        branch: None,
                    },
                    _ => self.head_state()?,
                }
            }
            // Reftable keeps HEAD elsewhere: ask git.
            _ => self.head_state()?,
        })
    }

    /// Branches checked out in another work tree of this repository (from
    /// their `HEAD` files: `git worktree list` fails on one being added).
    pub(crate) fn branches_checked_out_elsewhere(&self) -> BTreeSet<String> {
        let mut heads = vec![self.common_dir.join("HEAD")];
        if let Ok(entries) = std::fs::read_dir(self.common_dir.join("worktrees")) {
            heads.extend(entries.flatten().map(|e| e.path().join("HEAD")));
        }
        heads
            .into_iter()
            .filter(|h| {
                h.parent()
                    .is_some_and(|d| !super::same_dir(d, &self.git_dir))
            })
            .filter_map(|h| std::fs::read_to_string(h).ok())
            .filter_map(|t| t.trim_end().strip_prefix("ref: ").map(str::to_owned))
            .collect()
    }

    /// Real modes, empty directories and large untracked files, from the
    /// snapshot's index (read directly, not through git).
    fn collect_file_meta(
        &self,
        tmp: &std::path::Path,
        user_index: Option<&[u8]>,
        meta: &mut Meta,
        notices: &mut Vec<String>,
    ) {
        let Ok(bytes) = std::fs::read(tmp) else {
            return;
        };
        let Some(entries) = index_file::entries(&bytes, self.hash_len) else {
            return;
        };
        let mut real: Vec<(&[u8], u32, u32)> = Vec::new();
        let mut large = Vec::new();
        let mut cache = self.shared.modes.lock().ok();
        for e in &entries {
            if e.mode != 0o100644 && e.mode != 0o100755 {
                continue;
            }
            // git just compared these stats (ctime included: a chmod shows)
            // with the file: if they are the ones seen last time, so is the mode.
            let cached = cache
                .as_ref()
                .and_then(|c| c.get(&path_key(&e.path)))
                .filter(|(stat, _, _)| *stat == e.stat)
                .map(|&(_, mode, len)| (mode, len));
            let found = cached.or_else(|| {
                let full = self.root.join(tree_io::rel_path(&e.path));
                let m = std::fs::symlink_metadata(&full)
                    .ok()
                    .filter(|m| m.is_file())?;
                let seen = (m.permissions().mode() & 0o7777, m.len());
                if let Some(c) = cache.as_mut() {
                    c.insert(path_key(&e.path), (e.stat, seen.0, seen.1));
                }
                Some(seen)
            });
            if let Some((mode, len)) = found {
                real.push((&e.path, e.mode, mode));
                if len > LARGE_FILE && !user_index.is_some_and(|u| contains(u, &e.path)) {
                    large.push((tree_io::rel_path(&e.path), len));
                }
            }
        }
        drop(cache);
        meta.default_modes = (
            most_common(real.iter().filter(|r| r.1 == 0o100644).map(|r| r.2), 0o644),
            most_common(real.iter().filter(|r| r.1 == 0o100755).map(|r| r.2), 0o755),
        );
        for (path, git_mode, mode) in real {
            if meta.mode_of(path, git_mode) != mode {
                meta.modes.insert(path.to_vec(), mode);
            }
        }
        let mut listings = self
            .shared
            .listings
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        meta.empty_dirs =
            tree_io::empty_dirs(&self.root, entries.iter().map(|e| &*e.path), &mut listings);
        drop(listings);
        if let Ok(mut warned) = self.shared.warned_large.lock() {
            large.retain(|(p, _)| warned.insert(p.clone()));
        }
        if !large.is_empty() {
            let list: Vec<String> = large
                .iter()
                .map(|(p, n)| format!("{} ({} MB)", p.display(), n / 1_000_000))
                .collect();
            notices.push(format!(
                "large untracked files are copied into .git with every checkpoint: {}; add them to .gitignore if they are not part of the work",
                list.join(", ")
            ));
        }
    }

    pub(crate) fn head_state(&self) -> Result<HeadState, CheckpointError> {
        let commit = self.resolve_commit("HEAD")?;
        let out = self.git.cmd(["symbolic-ref", "-q", "HEAD"]).output()?;
        let branch = match out.status.code() {
            Some(0) => Some(out.stdout_line()),
            // Exit 1: HEAD is detached.
            Some(1) => None,
            code => {
                return Err(CheckpointError::Git {
                    command: "git symbolic-ref -q HEAD".into(),
                    code,
                    stderr: out.stderr_text(),
                });
            }
        };
        Ok(HeadState { commit, branch })
    }

    /// The commit `rev` names, or `None` when it names nothing (an unborn
    /// branch, a missing ref).
    pub(crate) fn resolve_commit(&self, rev: &str) -> Result<Option<String>, CheckpointError> {
        let spec = format!("{rev}^{{commit}}");
        let out = self
            .git
            .cmd(["rev-parse", "-q", "--verify", &spec])
            .output()?;
        match out.status.code() {
            Some(0) => Ok(Some(out.stdout_line())),
            Some(1) if out.stdout.is_empty() => Ok(None),
            code => Err(CheckpointError::Git {
                command: format!("git rev-parse -q --verify {spec}"),
                code,
                stderr: out.stderr_text(),
            }),
        }
    }

    pub(crate) fn user_index_path(&self) -> PathBuf {
        self.git_dir.join("index")
    }

    /// The user's index and its mtime in seconds, taken before the bytes
    /// are read (a newer index then only makes more entries look recent).
    fn read_user_index_dated(&self) -> Result<(Option<Vec<u8>>, Option<u64>), CheckpointError> {
        let written = std::fs::metadata(self.user_index_path())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        Ok((self.read_user_index()?, written))
    }

    pub(crate) fn read_user_index(&self) -> Result<Option<Vec<u8>>, CheckpointError> {
        let path = self.user_index_path();
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::io("cannot read the git index", path, e)),
        }
    }

    /// The blob this run stored for exactly these index bytes, if any.
    pub(crate) fn stored_index_blob(&self, bytes: &[u8]) -> Option<String> {
        let key = (bytes.len() as u64, digest(bytes));
        let cache = self.shared.index_blob.lock().ok()?;
        let (len, d, blob) = cache.as_ref()?;
        ((*len, *d) == key).then(|| blob.clone())
    }

    /// Stores the user's index bytes as a blob (it survives a crash), unless
    /// the same bytes were stored by an earlier checkpoint of this run.
    /// Stores the user's index (a task commit just changed it) on a thread
    /// of its own, while the run records the commit: the next checkpoint
    /// finds it stored.
    pub(crate) fn store_user_index_soon(&self) {
        let cp = self.clone();
        self.store_soon(move || {
            if let Ok(Some(bytes)) = cp.read_user_index() {
                let _ = cp.store_user_index(&bytes);
            }
        });
    }

    /// Stores `bytes`, the user's index to be, on a thread of its own (see
    /// [`Checkpointer::store_user_index_soon`]).
    pub(crate) fn store_index_bytes_soon(&self, bytes: Vec<u8>) {
        let cp = self.clone();
        self.store_soon(move || {
            let _ = cp.store_user_index(&bytes);
        });
    }

    fn store_soon(&self, store: impl FnOnce() + Send + 'static) {
        let spawned = std::thread::Builder::new()
            .name("index-blob".into())
            .spawn(store);
        if let (Ok(handle), Ok(mut slot)) = (spawned, self.shared.index_storing.lock()) {
            slot.push(handle);
        }
    }

    /// Waits for the threads storing the user's index, if any: no git of
    /// ours outlives the run.
    pub fn settle(&self) {
        let doomed = self.take_doomed();
        if !doomed.is_empty() {
            self.delete_doomed_alone(&doomed);
        }
        let handles = self
            .shared
            .index_storing
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        for h in handles {
            let _ = h.join();
        }
    }

    /// What the index ref names to keep the index `blob` reachable: a tree
    /// holding it as `index`, where objects are ours to write. git checks
    /// the whole hash of a blob a ref update names (a megabyte at 10,000
    /// files, at every checkpoint); a tree it only parses. Else the blob.
    fn index_keeper(&self, blob: &str) -> String {
        if !self.writes_objects || self.hash_len != 20 {
            return blob.to_owned();
        }
        let Some(raw) = super::object_id::unhex(blob) else {
            return blob.to_owned();
        };
        let mut tree = b"100644 index\0".to_vec();
        tree.extend_from_slice(&raw);
        super::object_id::write_object(&self.common_dir.join("objects"), "tree", &tree)
            .unwrap_or_else(|_| blob.to_owned())
    }

    fn store_user_index(&self, bytes: &[u8]) -> Result<String, CheckpointError> {
        let key = (bytes.len() as u64, digest(bytes));
        if let Ok(cache) = self.shared.index_blob.lock()
            && let Some((len, d, blob)) = cache.as_ref()
            && (*len, *d) == key
        {
            return Ok(blob.clone());
        }
        let written = self
            .writes_objects
            .then(|| super::object_id::write_blob(&self.common_dir.join("objects"), bytes).ok())
            .flatten();
        let blob = match written {
            Some(blob) => blob,
            // --no-filters: the bytes exactly, whatever .gitattributes says.
            None => {
                let out = self
                    .git
                    .cmd(["hash-object", "-w", "--no-filters", "--stdin"])
                    .stdin(bytes.to_vec())
                    .run()?;
                String::from_utf8_lossy(&out).trim().to_owned()
            }
        };
        if let Ok(mut cache) = self.shared.index_blob.lock() {
            *cache = Some((key.0, key.1, blob.clone()));
        }
        Ok(blob)
    }

    /// `git add -A` (minus the excluded paths) into `tmp`. A nested
    /// repository without commits cannot be added: it is left out (and
    /// returned) rather than failing the checkpoint.
    pub(crate) fn add_all(&self, tmp: &TempIndex) -> Result<Vec<String>, CheckpointError> {
        let out = self
            .git
            .cmd(["add", "-A", "--ignore-errors", "--", "."])
            .index(&tmp.path)
            .c_locale()
            .output()?;
        if out.status.success() {
            return Ok(Vec::new());
        }
        let stderr = out.stderr_text();
        let mut nested = Vec::new();
        for line in stderr.lines() {
            let repo = line
                .strip_prefix("error: '")
                .and_then(|l| l.strip_suffix("' does not have a commit checked out"));
            match repo {
                Some(r) => nested.push(r.to_owned()),
                None if line.starts_with("warning:") || line.starts_with("hint:") => {}
                None => {
                    return Err(CheckpointError::Git {
                        command: "git add -A --ignore-errors".into(),
                        code: out.status.code(),
                        stderr,
                    });
                }
            }
        }
        Ok(nested)
    }

    pub(crate) fn write_tree(&self, tmp: &TempIndex) -> Result<String, CheckpointError> {
        let out = self.git.cmd(["write-tree"]).index(&tmp.path).run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    pub(crate) fn commit_tree(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
    ) -> Result<String, CheckpointError> {
        // spectr's own commits: its identity, the time in UTC.
        let spectr = |now: u64| {
            let ident = format!("{} {now} +0000", super::git::spectr_ident());
            Some((ident.clone(), ident))
        };
        match self.write_commit(tree, parents, message, spectr) {
            Some(id) => Ok(id),
            None => self.commit_tree_by(tree, parents, message, false),
        }
    }

    /// `git commit-tree`, unsigned: as spectr (a checkpoint), or with the
    /// user's identity (a task's commit).
    pub(crate) fn commit_tree_by(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        as_user: bool,
    ) -> Result<String, CheckpointError> {
        if as_user && let Some(id) = self.write_user_commit(tree, parents, message) {
            return Ok(id);
        }
        let mut cmd = self.git.cmd(["commit-tree", "--no-gpg-sign"]);
        if as_user {
            cmd = cmd.user_identity();
        }
        for p in parents {
            cmd = cmd.args(["-p", p]);
        }
        let out = cmd
            .args(["-F", "-", tree])
            .stdin(message.as_bytes().to_vec())
            .run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }
}

impl Checkpointer {
    /// A commit as the user's `git commit-tree` would make it, written
    /// without git where objects are ours to write (a git process fewer on
    /// every task's commit); `None`: git must make it ([`super::ident`]).
    fn write_user_commit(&self, tree: &str, parents: &[String], message: &str) -> Option<String> {
        if super::ident::dates_fixed_by_env() {
            return None;
        }
        // Asked only once a commit can be written here at all.
        let idents = || {
            self.shared.idents.get_or_init(|| {
                // Each asked on its own: `git var` then checks it as strictly as
                // `git commit-tree` would (an empty email is refused).
                let var = |name: &str| self.user_var(name).ok();
                let config = self
                    .git
                    .cmd(["config", "-z", "--get-regexp", super::ident::CONFIG_KEYS])
                    .user_config()
                    .output()
                    .ok()?;
                super::ident::UserIdents::from_git(
                    &var("GIT_AUTHOR_IDENT")?,
                    &var("GIT_COMMITTER_IDENT")?,
                    &config.stdout,
                )
            })
        };
        self.write_commit(tree, parents, message, |now| {
            let idents = idents().as_ref()?;
            let date = format!("{now} {}", super::ident::local_zone(now.try_into().ok()?)?);
            Some((
                format!("{} {date}", idents.author),
                format!("{} {date}", idents.committer),
            ))
        })
    }

    /// A commit object written without git, where objects are ours to
    /// write and git would keep `message` as it is: `dated` gives the
    /// author and committer lines for the time now (seconds). `None`: git
    /// must make it.
    fn write_commit(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        dated: impl FnOnce(u64) -> Option<(String, String)>,
    ) -> Option<String> {
        if !self.writes_objects
            || self.hash_len != 20
            || !is_object_id(tree)
            || !parents.iter().all(|p| is_object_id(p))
            || !super::ident::message_kept_as_is(message)
        {
            return None;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        let (author, committer) = dated(now)?;
        let bytes = super::object_id::commit_bytes(tree, parents, &author, &committer, message);
        super::object_id::write_object(&self.common_dir.join("objects"), "commit", &bytes).ok()
    }
}

/// Runs `a` on a thread of its own and `b` on this one (one after the other
/// if no thread can be had); a panic in `a` carries on here.
pub(crate) fn both<A: Send, B>(a: impl Fn() -> A + Sync, b: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|s| {
        let other = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn_scoped(s, &a);
        let here = b();
        let there = match other {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => a(),
        };
        (there, here)
    })
}

/// A full object id (SHA-1 or SHA-256, hex).
pub(crate) fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Our refs live under `refs/`; git checks the rest when it writes them.
pub(crate) fn check_refname(refname: &str) -> Result<(), CheckpointError> {
    let bad = |reason: &str| {
        Err(CheckpointError::InvalidRef {
            refname: refname.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if !refname.starts_with("refs/") {
        return bad("must start with refs/");
    }
    if refname.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("must not contain whitespace");
    }
    Ok(())
}

/// A 128-bit digest to recognise unchanged index bytes between checkpoints
/// of one run (not a security boundary).
pub(crate) fn digest(bytes: &[u8]) -> u128 {
    // XXH3: the user's index (a megabyte at 10,000 files) is told apart
    // several times a task; SipHash took ~0.5 ms a pass.
    xxhash_rust::xxh3::xxh3_128(bytes)
}

fn path_key(path: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(path)
}

fn most_common(modes: impl Iterator<Item = u32>, fallback: u32) -> u32 {
    let mut counts: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for m in modes {
        *counts.entry(m).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(m, n)| (n, m == fallback))
        .map_or(fallback, |(m, _)| m)
}

pub(crate) fn nested_notice(repos: &[String]) -> String {
    format!(
        "left alone (nested git repositories, neither checkpointed nor reverted): {}",
        repos.join(", ")
    )
}
