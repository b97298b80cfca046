//! A task's commit on the user's branch: the branch's tree plus exactly the
//! task's change (`base` -> `after`), made with the user's identity, never
//! holding the user's own uncommitted work. Below the loop: it knows trees,
//! refs and the index, not tasks.
//!
//! The change is merged onto the branch's tree as a lane's merge-back is
//! (`git merge-tree --merge-base`), so work of the user's that was in the
//! tree before the task ran (in `base`) is neither taken in nor undone: a
//! path where the task's change overlaps it cannot be told apart and is
//! left out of the commit (it stays in the work tree, uncommitted).

use super::error::CheckpointError;
use super::tree_diff::Diff;
use super::{Checkpointer, exclude};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What a task's commit is made of.
#[derive(Debug, Clone)]
pub struct TaskChange<'a> {
    /// `refs/heads/<name>`: the branch the run commits on.
    pub branch: &'a str,
    /// The branch's commit when the run last saw it (it started there, or
    /// committed there): the branch must still hold it. `None`: unborn.
    pub since: Option<&'a str>,
    /// The tree before the task, and after it (trees or commits).
    pub base: &'a str,
    pub after: &'a str,
    /// Paths left out of the change (the change's tasks files: their status
    /// edit is made on the branch's version by `edit`).
    pub skip: &'a [PathBuf],
    pub message: &'a str,
    /// What the run knows already, so the usual commit asks git nothing
    /// to find its trees: `since`'s tree, `base`'s tree, and whether
    /// `after` is a tree.
    pub known: Known<'a>,
}

/// Trees a [`TaskChange`]'s maker knows without asking git.
#[derive(Debug, Clone, Default)]
pub struct Known<'a> {
    pub since_tree: Option<&'a str>,
    pub base_tree: Option<&'a str>,
    pub after_is_tree: bool,
}

/// A path put into a tree: (path, mode, object); mode 0 removes it.
type TreeEdit = (Vec<u8>, u32, String);

/// The branch's versions of the skipped files that exist there (repo
/// relative), in; their new contents, out (only those that change).
pub type EditSkipped<'a> = dyn Fn(&[(PathBuf, Vec<u8>)]) -> Vec<(PathBuf, Vec<u8>)> + Sync + 'a;

/// What [`Checkpointer::commit_task`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// The new commit; `None` when the task left nothing to commit.
    pub commit: Option<String>,
    /// Its tree.
    pub tree: Option<String>,
    /// The branch's commit it went on.
    pub parent: Option<String>,
    /// Paths the commit changes, sorted.
    pub files: Vec<String>,
    /// Paths the task changed where it overlaps the user's uncommitted work:
    /// left out of the commit, in the work tree as they are. Sorted.
    pub left_out: Vec<String>,
    /// The user's index could not be brought in step (a git of the user's
    /// held its lock): why. The commit and the branch stand.
    pub index_not_updated: Option<String>,
    /// Things the user should know (a killed spectr's index lock removed).
    pub notices: Vec<String>,
}

/// An object `git cat-file --batch` found by name.
#[derive(Debug, Clone)]
pub(super) struct Found {
    oid: String,
    kind: String,
    bytes: Vec<u8>,
}

/// How the user's index followed a commit, so it can be put back.
enum Followed {
    /// The snapshot's index became the user's.
    Adopted(super::index_adopt::Adopted),
    /// These entries (the user's before) were updated.
    Entries(BTreeMap<String, (u32, String)>),
}

/// A tree and its versions of named files (`None`: not there).
#[derive(Debug, Clone)]
pub(super) struct SkippedIn {
    tree: String,
    files: Vec<(String, Option<Found>)>,
}

/// Why a task's commit was not made (the run stops; nothing is lost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotCommitted {
    /// HEAD is on another branch, or detached.
    Switched {
        branch: String,
        head: Option<String>,
    },
    /// The branch no longer holds the commit the run last saw on it (reset,
    /// rebased, or deleted).
    Rewritten {
        branch: String,
        was: String,
        now: Option<String>,
    },
}

impl std::fmt::Display for NotCommitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotCommitted::Switched { branch, head } => write!(
                f,
                "the run commits on {} but HEAD is now {}",
                short_branch(branch),
                head.as_deref().map_or("detached".to_string(), |h| format!(
                    "on {}",
                    short_branch(h)
                ))
            ),
            NotCommitted::Rewritten { branch, was, now } => write!(
                f,
                "{} no longer holds {} (it was reset or rewritten{})",
                short_branch(branch),
                short(was),
                now.as_deref()
                    .map_or(", or deleted".to_string(), |n| format!(
                        "; it is at {}",
                        short(n)
                    ))
            ),
        }
    }
}

/// The object type of a tree entry's mode.
fn kind_of(mode: u32) -> &'static str {
    match mode {
        super::tree_diff::GITLINK => "commit",
        0o040000 => "tree",
        _ => "blob",
    }
}

fn short_branch(refname: &str) -> &str {
    refname.strip_prefix("refs/heads/").unwrap_or(refname)
}

fn short(oid: &str) -> &str {
    &oid[..oid.len().min(12)]
}

impl Checkpointer {
    /// The branch HEAD is on (`refs/heads/...`), `None` when detached.
    pub fn current_branch(&self) -> Result<Option<String>, CheckpointError> {
        Ok(self.head_state()?.branch)
    }

    /// The commit a branch (or any rev) names now; `None` for an unborn one.
    pub fn commit_of(&self, rev: &str) -> Result<Option<String>, CheckpointError> {
        self.resolve_commit(rev)
    }

    /// `--branch NAME`: makes branch `name` at HEAD and puts HEAD on it
    /// (no checkout: the same commit, so the tree and the index stay as
    /// they are, and no hook runs). `Ok(None)` when HEAD is on it already
    /// (a resume); `Ok(Some(previous))` when made, with the branch HEAD was
    /// on (none when detached); `Err` why not, in words.
    pub fn start_branch(&self, name: &str) -> Result<Option<Option<String>>, String> {
        let refname = format!("refs/heads/{name}");
        let valid = self
            .git
            .cmd(["check-ref-format", &refname])
            .output()
            .is_ok_and(|o| o.status.success());
        if !valid {
            return Err(format!("`{name}` is not a valid branch name"));
        }
        let head = self.head_state().map_err(|e| e.to_string())?;
        if head.branch.as_deref() == Some(refname.as_str()) {
            return Ok(None);
        }
        let Some(commit) = head.commit else {
            return Err("this repository has no commit yet to make it from".into());
        };
        if self
            .resolve_commit(&refname)
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err(format!(
                "branch {name} exists already and HEAD is not on it: pick a new name, or switch to it (git switch {name}) and run again"
            ));
        }
        let zeros = "0".repeat(self.hash_len * 2);
        self.git
            .cmd([
                "update-ref",
                "-m",
                "spectr ralph: --branch",
                &refname,
                &commit,
                &zeros,
            ])
            .run()
            .map_err(|e| e.to_string())?;
        self.git
            .cmd([
                "symbolic-ref",
                "-m",
                "spectr ralph: --branch",
                "HEAD",
                &refname,
            ])
            .run()
            .map_err(|e| e.to_string())?;
        Ok(Some(head.branch))
    }

    /// `ralph: push:`: pushes `branch` (`refs/heads/...`) to `remote`, as
    /// the user's git would (their config and credentials; no hook, no
    /// prompt). Git's words when it fails.
    pub fn push_branch(&self, remote: &str, branch: &str) -> Result<(), String> {
        let spec = format!("{branch}:{branch}");
        let out = self
            .git
            .cmd(["push", "--no-verify", "--quiet", remote, &spec])
            .user_config()
            .user_identity()
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            let said = out.stderr_text();
            let line = said
                .lines()
                .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
                .or_else(|| said.lines().next())
                .unwrap_or("git push failed");
            Err(line.to_string())
        }
    }

    /// The identity the user's commits get (`git var GIT_COMMITTER_IDENT`),
    /// or git's words on why there is none, for the committer or the
    /// author (each may be configured apart, and git refuses either).
    pub fn user_ident(&self) -> Result<String, String> {
        let committer = self.user_var("GIT_COMMITTER_IDENT")?;
        self.user_var("GIT_AUTHOR_IDENT")?;
        Ok(String::from_utf8_lossy(&committer).trim_end().to_owned())
    }

    /// `git var <name>` as the user's own git answers it (their config and
    /// identity variables; as strict as `git commit-tree`): its raw output,
    /// or git's words on why not.
    pub(crate) fn user_var(&self, name: &str) -> Result<Vec<u8>, String> {
        let out = self
            .git
            .cmd(["var", name])
            .user_identity()
            .user_config()
            .output()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(out.stdout),
            false => Err(out.stderr_text()),
        }
    }

    /// Whether the user's config asks for signed commits (`commit.gpgsign`):
    /// its last value in the user's own files (spectr's git turns signing
    /// off on its command line, which must not hide the user's setting).
    pub fn signing_asked(&self) -> bool {
        let Ok(out) = self
            .git
            .cmd([
                "config",
                "--show-scope",
                "--type=bool",
                "--get-all",
                "commit.gpgsign",
            ])
            .user_config()
            .output()
        else {
            return false;
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .rfind(|(scope, _)| *scope != "command")
            .is_some_and(|(_, value)| value.trim() == "true")
    }

    /// Commits `change` on its branch (see the module docs). `Ok(Err(..))`
    /// when the branch moved under the run in a way a commit cannot follow.
    ///
    /// In the usual case (no work of the user's in the tree, the tasks
    /// files already saying what the commit says) the commit's tree is the
    /// attempt's snapshot itself, and the snapshot's index becomes the
    /// user's ([`super::index_adopt`]): three git commands (the diff, the
    /// commit, the branch's move), the tasks files known from the last
    /// commit.
    pub fn commit_task(
        &self,
        change: &TaskChange<'_>,
        edit: &EditSkipped<'_>,
    ) -> Result<Result<Committed, NotCommitted>, CheckpointError> {
        // A spectr killed while it wrote your index left git's lock.
        let recovered = self.recover_own_index_lock();
        let branch = self.head_branch()?;
        if branch.as_deref() != Some(change.branch) {
            return Ok(Err(NotCommitted::Switched {
                branch: change.branch.to_owned(),
                head: branch,
            }));
        }
        let (parent, [ours, base, after]) = self.branch_and_trees(change)?;
        if let Some(was) = change.since
            && parent.as_deref() != Some(was)
            && !self.is_ancestor(was, parent.as_deref())?
        {
            return Ok(Err(NotCommitted::Rewritten {
                branch: change.branch.to_owned(),
                was: was.to_owned(),
                now: parent,
            }));
        }
        let skip: Vec<PathBuf> = change
            .skip
            .iter()
            .filter_map(|p| exclude::repo_relative(&self.root, p))
            .collect();
        let parents: Vec<String> = parent.iter().cloned().collect();
        // Only over the commit it was built on: a commit of the user's made
        // this instant is never lost (the next task goes on top of it).
        let old = parent
            .clone()
            .unwrap_or_else(|| "0".repeat(self.hash_len * 2));
        let reason = format!(
            "spectr ralph: {}",
            change.message.lines().next().unwrap_or("task")
        );
        // Where the branch's tree is `base`, the snapshot is most often the
        // commit's tree as it is: its commit is made, and the branch's move
        // prepared, while that is checked (when it is not, the move is
        // dropped and the object is named by nothing: git's gc takes it).
        let (plain, made) = match ours == base {
            true => super::snapshot::both(
                || self.snapshot_as_is(&base, &after, &skip, edit),
                || {
                    (after != ours).then(|| {
                        let commit = self.commit_tree_by(&after, &parents, change.message, true)?;
                        let prepared = self.prepare_move(change.branch, &commit, &old, &reason);
                        Ok::<_, CheckpointError>((commit, prepared))
                    })
                },
            ),
            false => (Ok(None), None),
        };
        let plain = plain?;
        let (tree, left_out, diff) = match plain {
            Some(diff) => (after.clone(), Vec::new(), diff),
            None => {
                let (tree, left_out) =
                    self.merged_tree(&ours, &base, &after, &skip, change, edit)?;
                let diff = self.diff_trees(&ours, &tree)?;
                (tree, left_out, diff)
            }
        };
        if tree == ours {
            return Ok(Ok(Committed {
                parent,
                left_out,
                ..Committed::default()
            }));
        }
        let files: Vec<String> = diff
            .iter()
            .map(|d| String::from_utf8_lossy(&d.path).into_owned())
            .collect();
        let (commit, prepared) = match made {
            Some(Ok((commit, prepared))) if tree == after => (commit, prepared),
            unused => {
                // A move prepared for another commit: aborted now (its lock
                // would stop the one below).
                drop(unused);
                let commit = self.commit_tree_by(&tree, &parents, change.message, true)?;
                (commit, None)
            }
        };
        // The index follows beside the branch's move (a kill between the
        // two leaves the task's files staged; the resume's commit settles
        // them). If the branch cannot move, the index is put back.
        // The drops left for now go with it ([`Checkpointer::drop_soon`]),
        // or with the next checkpoint after a prepared move.
        let doomed = match prepared {
            Some(_) => Vec::new(),
            None => self.take_doomed(),
        };
        let move_branch = || {
            if let Some(prepared) = prepared {
                return prepared.commit().map(|()| Vec::new());
            }
            let update = |deletions: &[String]| {
                let mut script = format!("update {} {commit} {old}\n", change.branch);
                for d in deletions {
                    script.push_str(&format!("delete {d}\n"));
                }
                self.git
                    .cmd(["update-ref", "-m", &reason, "--stdin"])
                    .stdin(script.into_bytes())
                    .run()
            };
            match doomed.is_empty() {
                true => update(&[]),
                false => update(&doomed).or_else(|_| {
                    let moved = update(&[]);
                    self.delete_doomed_alone(&doomed);
                    moved
                }),
            }
        };
        let follow = || -> Result<Followed, CheckpointError> {
            if let Some(adopted) = self.index_adopt_kept(&tree, &diff) {
                return Ok(Followed::Adopted(adopted));
            }
            let staged = self.staged_at(&files)?;
            self.index_follows_from(&diff, &staged)?;
            Ok(Followed::Entries(staged))
        };
        let (followed, moved) = super::snapshot::both(follow, move_branch);
        if let Err(e) = moved {
            match &followed {
                Ok(Followed::Adopted(adopted)) => self.index_unadopt(adopted),
                Ok(Followed::Entries(staged)) => {
                    let _ = self.index_unfollow(&diff, staged);
                }
                Err(_) => {}
            }
            return Err(e);
        }
        match &followed {
            Ok(Followed::Adopted(adopted)) if adopted.storing => {}
            Ok(_) => self.store_user_index_soon(),
            Err(_) => {}
        }
        let index_not_updated = followed.err().map(|e| e.to_string());
        Ok(Ok(Committed {
            commit: Some(commit),
            tree: Some(tree),
            parent,
            files,
            left_out,
            index_not_updated,
            notices: recovered.into_iter().collect(),
        }))
    }

    /// The branch's commit (`None`: unborn) and the trees of the branch,
    /// `base` and `after`: one `git rev-parse` when the branch is born.
    fn branch_and_trees(
        &self,
        change: &TaskChange<'_>,
    ) -> Result<(Option<String>, [String; 3]), CheckpointError> {
        // The branch where the run left it, trees known: no git command.
        if let (Some(since), Some(ours), Some(base), true) = (
            change.since,
            change.known.since_tree,
            change.known.base_tree,
            change.known.after_is_tree,
        ) && super::head::read_ref_file(&self.common_dir, change.branch)
            == Some(Some(since.to_owned()))
        {
            let trees = [ours.to_owned(), base.to_owned(), change.after.to_owned()];
            return Ok((Some(since.to_owned()), trees));
        }
        let revs = [
            change.branch.to_owned(),
            format!("{}^{{tree}}", change.branch),
            format!("{}^{{tree}}", change.base),
            format!("{}^{{tree}}", change.after),
        ];
        let out = self.git.cmd(["rev-parse", "-q"]).args(&revs).output()?;
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            if let [p, o, b, a] = text.lines().map(str::trim).collect::<Vec<_>>()[..] {
                let trees = [o.to_owned(), b.to_owned(), a.to_owned()];
                return Ok((Some(p.to_owned()), trees));
            }
        }
        // Unborn (or something odd): one at a time, each error its own.
        let parent = self.resolve_commit(change.branch)?;
        let ours = match &parent {
            Some(p) => format!("{p}^{{tree}}"),
            None => self.empty_tree().to_owned(),
        };
        let trees = self.rev_parse_trees([ours, revs[2].clone(), revs[3].clone()])?;
        Ok((parent, trees))
    }

    /// When the branch's tree is `base`: the snapshot `after` is the
    /// commit's tree as it is if every skipped path there is what the commit
    /// wants (the branch's version, with `edit` applied). Then the diff
    /// `base` -> `after`; `None` when it is not.
    fn snapshot_as_is(
        &self,
        base: &str,
        after: &str,
        skip: &[PathBuf],
        edit: &EditSkipped<'_>,
    ) -> Result<Option<Vec<Diff>>, CheckpointError> {
        let names: Vec<String> = skip
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        // `cat-file --batch` reads one name a line.
        if names.iter().any(|n| n.contains('\n') || n.is_empty()) {
            return Ok(None);
        }
        // The skipped files' versions on the branch (`was`, blobs only).
        let blobs = |was: &mut dyn Iterator<Item = Option<&Found>>| -> Vec<(PathBuf, Vec<u8>)> {
            names
                .iter()
                .zip(was)
                .filter_map(|(n, o)| match o {
                    Some(o) if o.kind == "blob" => Some((PathBuf::from(n), o.bytes.clone())),
                    _ => None,
                })
                .collect()
        };
        let (diff, found, edited) = match self.skipped_known(base, &names) {
            // The usual case after the first commit: the skipped files are
            // the last commit's, and the diff says what the snapshot holds;
            // the edit is made beside the diff.
            Some(was) => {
                let ours = blobs(&mut was.iter().map(Option::as_ref));
                let (diff, edited) = super::snapshot::both(
                    || match self.diff_from_indexes(base, after) {
                        Some(diff) => Ok(diff),
                        None => self.diff_trees(base, after),
                    },
                    || edit(&ours),
                );
                let diff = diff?;
                let found = names
                    .iter()
                    .zip(was)
                    .flat_map(|(n, was)| {
                        let now = match diff.iter().find(|d| d.path == n.as_bytes()) {
                            Some(d) => d.new.as_ref().map(|e| Found {
                                oid: e.oid.clone(),
                                kind: kind_of(e.mode).to_owned(),
                                bytes: Vec::new(),
                            }),
                            None => was.clone(),
                        };
                        [was, now]
                    })
                    .collect::<Vec<_>>();
                (diff, found, edited)
            }
            None => {
                let specs: Vec<String> = names
                    .iter()
                    .flat_map(|n| [format!("{base}:{n}"), format!("{after}:{n}")])
                    .collect();
                let (diff, found) = super::snapshot::both(
                    || self.diff_trees(base, after),
                    || self.cat_paths(&specs),
                );
                let found = found?;
                let edited = edit(&blobs(
                    &mut found
                        .chunks(2)
                        .map(|pair| pair.first().and_then(Option::as_ref)),
                ));
                (diff?, found, edited)
            }
        };
        let mut kept = Vec::with_capacity(names.len());
        for (name, pair) in names.iter().zip(found.chunks(2)) {
            let (was, now) = match pair {
                [was, now] => (was.as_ref(), now.as_ref()),
                _ => return Ok(None),
            };
            let wanted = edited.iter().find(|(p, _)| p.as_os_str() == name.as_str());
            let same = match (wanted, now) {
                (Some((_, bytes)), Some(now)) => now.kind == "blob" && self.is_blob_of(now, bytes),
                (Some(_), None) => false,
                (None, now) => was.map(|w| &w.oid) == now.map(|n| &n.oid),
            };
            if !same {
                return Ok(None);
            }
            let now = match (wanted, now) {
                (Some((_, bytes)), Some(now)) => Some(Found {
                    bytes: bytes.clone(),
                    ..now.clone()
                }),
                (_, now) => now.cloned(),
            };
            kept.push((name.clone(), now));
        }
        self.remember_skipped(after, kept);
        Ok(Some(diff))
    }

    /// The skipped files `names` as `tree` holds them, when the last
    /// commit's tree was `tree` (bytes known for every blob).
    fn skipped_known(&self, tree: &str, names: &[String]) -> Option<Vec<Option<Found>>> {
        // Blob ids are computed here for SHA-1 only (see `object_id`).
        if self.hash_len != 20 {
            return None;
        }
        let known = self.shared.skipped_in.lock().ok()?.clone()?;
        if known.tree != tree || known.files.len() != names.len() {
            return None;
        }
        known
            .files
            .into_iter()
            .zip(names)
            .map(|((n, f), name)| (n == *name).then_some(f))
            .collect()
    }

    fn remember_skipped(&self, tree: &str, files: Vec<(String, Option<Found>)>) {
        if let Ok(mut known) = self.shared.skipped_in.lock() {
            *known = Some(SkippedIn {
                tree: tree.to_owned(),
                files,
            });
        }
    }

    /// Whether the object `found` is a blob of exactly `bytes`: by its id
    /// when its bytes were not read.
    fn is_blob_of(&self, found: &Found, bytes: &[u8]) -> bool {
        if found.bytes.is_empty() {
            return super::object_id::blob_id(bytes, self.hash_len).as_deref()
                == Some(found.oid.as_str());
        }
        found.bytes == bytes
    }

    /// The commit's tree when the snapshot cannot serve as it is: the
    /// task's change put onto the branch's tree path by path, merged where
    /// the user's work is there too, the skipped files' edits on top; the
    /// paths left out.
    fn merged_tree(
        &self,
        ours: &str,
        base: &str,
        after: &str,
        skip: &[PathBuf],
        change: &TaskChange<'_>,
        edit: &EditSkipped<'_>,
    ) -> Result<(String, Vec<String>), CheckpointError> {
        let edits = self.edit_skipped(ours, skip, edit)?;
        match self.plain_change(ours, base, after, skip)? {
            Some(mut entries) => {
                entries.extend(edits);
                Ok((self.tree_with(ours, &entries)?, Vec::new()))
            }
            None => {
                let (tree, left_out) = self.task_tree(ours, base, after, change)?;
                Ok((self.tree_with(&tree, &edits)?, left_out))
            }
        }
    }

    /// `<tree>:<path>` objects, one `git cat-file --batch`: each found one's
    /// id, type and bytes, in order.
    fn cat_paths(&self, specs: &[String]) -> Result<Vec<Option<Found>>, CheckpointError> {
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        let input: String = specs.iter().map(|s| format!("{s}\n")).collect();
        let out = self
            .git
            .cmd(["cat-file", "--batch", "--buffer"])
            .stdin(input.into_bytes())
            .run()?;
        let unexpected = || CheckpointError::Unexpected {
            command: "git cat-file --batch".into(),
            output: String::from_utf8_lossy(&out).chars().take(500).collect(),
        };
        let mut found = Vec::with_capacity(specs.len());
        let mut pos = 0;
        for _ in specs {
            let nl = pos
                + out
                    .get(pos..)
                    .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
                    .ok_or_else(unexpected)?;
            let header = String::from_utf8_lossy(&out[pos..nl]).into_owned();
            let words: Vec<&str> = header.split(' ').collect();
            match words[..] {
                [oid, kind, size] if super::snapshot::is_object_id(oid) => {
                    let size: usize = size.parse().map_err(|_| unexpected())?;
                    let bytes = out.get(nl + 1..nl + 1 + size).ok_or_else(unexpected)?;
                    found.push(Some(Found {
                        oid: oid.to_owned(),
                        kind: kind.to_owned(),
                        bytes: bytes.to_vec(),
                    }));
                    pos = nl + 1 + size + 1;
                }
                // `<name> missing` (or ambiguous): not there.
                _ => {
                    found.push(None);
                    pos = nl + 1;
                }
            }
        }
        Ok(found)
    }

    /// Brings the user's index in step with `commit` (a task's commit made
    /// by a run killed before it could): entries that are still its
    /// parent's become the commit's, as after [`Checkpointer::commit_task`].
    pub fn index_follow_commit(&self, commit: &str) -> Result<(), CheckpointError> {
        self.recover_own_index_lock();
        let parent = format!("{commit}^");
        let parent = match self.resolve_commit(&parent)? {
            Some(p) => format!("{p}^{{tree}}"),
            None => self.empty_tree().to_owned(),
        };
        let diff = self.diff_trees(&parent, &format!("{commit}^{{tree}}"))?;
        self.index_follows(&diff)
    }

    /// The first commit on `branch` since `since` (not included) whose
    /// message holds every line of `trailers`: a task's commit made before
    /// a kill, found instead of made twice.
    pub fn find_commit_with(
        &self,
        branch: &str,
        since: Option<&str>,
        trailers: &[String],
    ) -> Result<Option<String>, CheckpointError> {
        if self.resolve_commit(branch)?.is_none() {
            return Ok(None);
        }
        let range = match since {
            Some(s) => format!("{s}..{branch}"),
            None => branch.to_owned(),
        };
        let out = self
            .git
            .cmd(["log", "--first-parent", "-z", "--format=%H%n%B", &range])
            .output()?;
        if !out.status.success() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        for entry in text.split('\0') {
            let Some((id, body)) = entry.split_once('\n') else {
                continue;
            };
            let lines: Vec<&str> = body.lines().map(str::trim).collect();
            if trailers.iter().all(|t| lines.contains(&t.as_str())) {
                return Ok(Some(id.trim().to_owned()));
            }
        }
        Ok(None)
    }

    /// Whether every commit on `tip` since `since` (its ancestor) holds the
    /// line `trailer`, and there is at least one: a branch moved by spectr's
    /// own task commits alone.
    pub fn only_commits_with(
        &self,
        since: &str,
        tip: &str,
        trailer: &str,
    ) -> Result<bool, CheckpointError> {
        if !self.is_ancestor(since, Some(tip))? {
            return Ok(false);
        }
        let range = format!("{since}..{tip}");
        let out = self
            .git
            .cmd(["log", "-z", "--format=%B", &range])
            .output()?;
        if !out.status.success() {
            return Ok(false);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let bodies: Vec<&str> = text.split('\0').filter(|b| !b.trim().is_empty()).collect();
        Ok(!bodies.is_empty()
            && bodies
                .iter()
                .all(|b| b.lines().any(|l| l.trim() == trailer)))
    }

    /// The task's change (`base` -> `after`, without `skip`) as entries to
    /// put into `ours`, when every path it changes is in `ours` as it was in
    /// `base` (no work of the user's there, nothing committed there since):
    /// the usual case, needing no merge. `None` otherwise.
    fn plain_change(
        &self,
        ours: &str,
        base: &str,
        after: &str,
        skip: &[PathBuf],
    ) -> Result<Option<Vec<TreeEdit>>, CheckpointError> {
        let (entries, left_out) = self.change_by_path(ours, base, after, skip)?;
        Ok(left_out.is_empty().then_some(entries))
    }

    /// The task's change (`base` -> `after`, without `skip`, repo-relative)
    /// path by path: entries for the paths `ours` holds as `base` did, and
    /// the paths (sorted) where it does not (work of the user's there, or a
    /// commit since).
    fn change_by_path(
        &self,
        ours: &str,
        base: &str,
        after: &str,
        skip: &[PathBuf],
    ) -> Result<(Vec<TreeEdit>, Vec<String>), CheckpointError> {
        if base == after {
            return Ok((Vec::new(), Vec::new()));
        }
        let kept: Vec<Diff> = self
            .diff_trees(base, after)?
            .into_iter()
            .filter(|d| !super::merge::is_skipped(skip, &d.path))
            .collect();
        let names: Vec<String> = kept
            .iter()
            .map(|d| String::from_utf8_lossy(&d.path).into_owned())
            .collect();
        // `ours` is `base`: nothing there to compare.
        let now = if ours == base {
            None
        } else {
            Some(self.entries_at(ours, &names)?)
        };
        let zeros = "0".repeat(self.hash_len * 2);
        let (mut entries, mut left_out) = (Vec::new(), Vec::new());
        for (d, name) in kept.into_iter().zip(names) {
            let was = d.old.as_ref().map(|e| (e.mode, e.oid.clone()));
            if now
                .as_ref()
                .is_some_and(|now| now.get(&name) != was.as_ref())
            {
                left_out.push(name);
                continue;
            }
            entries.push(match d.new {
                Some(e) => (d.path, e.mode, e.oid),
                None => (d.path, 0, zeros.clone()),
            });
        }
        left_out.sort();
        Ok((entries, left_out))
    }

    /// The tree of `ours` with the task's change (`base` -> `after`,
    /// without `skip`) merged in; the paths left out where it overlaps work
    /// of the user's.
    fn task_tree(
        &self,
        ours: &str,
        base: &str,
        after: &str,
        change: &TaskChange<'_>,
    ) -> Result<(String, Vec<String>), CheckpointError> {
        if self.merges_onto_a_base().is_err() {
            return self.task_tree_by_path(ours, base, after, change.skip);
        }
        let Some((theirs, _)) = self.lane_change(base, after, change.skip)? else {
            return Ok((ours.to_owned(), Vec::new()));
        };
        let resolved = self.merge_tree(base, ours, &theirs)?;
        if resolved.conflicted.is_empty() {
            return Ok((resolved.tree, Vec::new()));
        }
        // Overlapping the user's own changes: the branch's version stands.
        let ours_entries = self.entries_at(ours, &resolved.conflicted)?;
        let zeros = "0".repeat(self.hash_len * 2);
        let entries: Vec<(Vec<u8>, u32, String)> = resolved
            .conflicted
            .iter()
            .map(|p| match ours_entries.get(p) {
                Some((mode, oid)) => (p.as_bytes().to_vec(), *mode, oid.clone()),
                None => (p.as_bytes().to_vec(), 0, zeros.clone()),
            })
            .collect();
        let tree = self.tree_with(&resolved.tree, &entries)?;
        Ok((tree, resolved.conflicted))
    }

    /// [`Self::task_tree`] for a git that cannot merge onto a base: the
    /// paths the user's work (or a commit since) also changed are left out
    /// whole, the others taken as the task left them.
    fn task_tree_by_path(
        &self,
        ours: &str,
        base: &str,
        after: &str,
        skip: &[PathBuf],
    ) -> Result<(String, Vec<String>), CheckpointError> {
        let skip: Vec<PathBuf> = skip
            .iter()
            .filter_map(|p| exclude::repo_relative(&self.root, p))
            .collect();
        let (entries, left_out) = self.change_by_path(ours, base, after, &skip)?;
        Ok((self.tree_with(ours, &entries)?, left_out))
    }

    /// `edit` applied to the branch's versions of the skipped files it has:
    /// index entries for those that change.
    fn edit_skipped(
        &self,
        ours: &str,
        skip: &[PathBuf],
        edit: &EditSkipped<'_>,
    ) -> Result<Vec<(Vec<u8>, u32, String)>, CheckpointError> {
        let names: Vec<String> = skip
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let present = self.entries_at(ours, &names)?;
        let mut files = Vec::new();
        for (name, (_, oid)) in &present {
            files.push((PathBuf::from(name), self.cat_one(oid)?));
        }
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let mut entries = Vec::new();
        for (path, bytes) in edit(&files) {
            let name = path.to_string_lossy().into_owned();
            let Some((mode, _)) = present.get(&name) else {
                continue;
            };
            let oid = self.hash_object(&bytes)?;
            entries.push((name.into_bytes(), *mode, oid));
        }
        Ok(entries)
    }

    /// Mode and object of each of `paths` in `tree` that it holds.
    fn entries_at(
        &self,
        tree: &str,
        paths: &[String],
    ) -> Result<BTreeMap<String, (u32, String)>, CheckpointError> {
        let mut found = BTreeMap::new();
        for chunk in paths.chunks(500) {
            if chunk.is_empty() {
                continue;
            }
            let out = self
                .git
                .cmd([
                    "--literal-pathspecs",
                    "ls-tree",
                    "-z",
                    "--full-tree",
                    tree,
                    "--",
                ])
                .args(chunk)
                .run()?;
            for entry in out.split(|b| *b == 0).filter(|e| !e.is_empty()) {
                let Some((words, path)) = super::tree_io::split_entry(entry) else {
                    continue;
                };
                if let [mode, kind, oid] = words.as_slice()
                    && kind != "tree"
                    && let Ok(mode) = u32::from_str_radix(mode, 8)
                {
                    let path = String::from_utf8_lossy(path).into_owned();
                    found.insert(path, (mode, oid.clone()));
                }
            }
        }
        Ok(found)
    }

    /// Brings the user's index in step with a commit that changed `diff`:
    /// an entry that was the branch's before (nothing staged there) becomes
    /// the commit's; one the user had staged otherwise is left as it is.
    fn index_follows(&self, diff: &[Diff]) -> Result<(), CheckpointError> {
        let paths: Vec<String> = diff
            .iter()
            .map(|d| String::from_utf8_lossy(&d.path).into_owned())
            .collect();
        let staged = self.staged_at(&paths)?;
        self.index_follows_from(diff, &staged)
    }

    /// The user's index entries (stage 0) at `paths`: mode and object.
    /// Read from the index file itself when this reader knows it (no git
    /// process to read a large index for a few paths), else `git ls-files`.
    fn staged_at(
        &self,
        paths: &[String],
    ) -> Result<BTreeMap<String, (u32, String)>, CheckpointError> {
        match self.read_user_index()? {
            None => return Ok(BTreeMap::new()),
            Some(bytes) => {
                if let Some(staged) = super::index_file::staged_at(&bytes, self.hash_len, paths) {
                    return Ok(staged);
                }
            }
        }
        let mut staged = BTreeMap::new();
        for chunk in paths.chunks(500) {
            if chunk.is_empty() {
                continue;
            }
            let out = self
                .git
                .cmd(["--literal-pathspecs", "ls-files", "-s", "-z", "--"])
                .args(chunk)
                .run()?;
            for entry in out.split(|b| *b == 0).filter(|e| !e.is_empty()) {
                let Some((words, path)) = super::tree_io::split_entry(entry) else {
                    continue;
                };
                if let [mode, oid, stage] = words.as_slice()
                    && stage == "0"
                    && let Ok(mode) = u32::from_str_radix(mode, 8)
                {
                    let path = String::from_utf8_lossy(path).into_owned();
                    staged.insert(path, (mode, oid.clone()));
                }
            }
        }
        Ok(staged)
    }

    /// [`Self::index_follows`] with the entries staged at `diff`'s paths.
    fn index_follows_from(
        &self,
        diff: &[Diff],
        staged: &BTreeMap<String, (u32, String)>,
    ) -> Result<(), CheckpointError> {
        let zeros = "0".repeat(self.hash_len * 2);
        let mut input = Vec::new();
        for d in diff {
            let path = String::from_utf8_lossy(&d.path).into_owned();
            let was = d.old.as_ref().map(|e| (e.mode, e.oid.clone()));
            if staged.get(&path) != was.as_ref() {
                continue;
            }
            let line = match &d.new {
                Some(e) => format!("{:o} {}\t", e.mode, e.oid),
                None => format!("0 {zeros}\t"),
            };
            input.extend_from_slice(line.as_bytes());
            input.extend_from_slice(&d.path);
            input.push(0);
        }
        if input.is_empty() {
            return Ok(());
        }
        self.git
            .cmd(["update-index", "-z", "--index-info"])
            .stdin(input)
            .run()?;
        Ok(())
    }

    /// Undoes [`Self::index_follows_from`]: the entries it changed are the
    /// branch's again.
    fn index_unfollow(
        &self,
        diff: &[Diff],
        staged: &BTreeMap<String, (u32, String)>,
    ) -> Result<(), CheckpointError> {
        let back: Vec<Diff> = diff
            .iter()
            .filter(|d| {
                let was = d.old.as_ref().map(|e| (e.mode, e.oid.clone()));
                staged.get(String::from_utf8_lossy(&d.path).as_ref()) == was.as_ref()
            })
            .map(|d| Diff {
                path: d.path.clone(),
                old: d.new.clone(),
                new: d.old.clone(),
            })
            .collect();
        let now: BTreeMap<String, (u32, String)> = back
            .iter()
            .filter_map(|d| {
                let e = d.old.as_ref()?;
                Some((
                    String::from_utf8_lossy(&d.path).into_owned(),
                    (e.mode, e.oid.clone()),
                ))
            })
            .collect();
        self.index_follows_from(&back, &now)
    }

    fn is_ancestor(&self, ancestor: &str, of: Option<&str>) -> Result<bool, CheckpointError> {
        let Some(of) = of else {
            return Ok(false);
        };
        let out = self
            .git
            .cmd(["merge-base", "--is-ancestor", ancestor, of])
            .output()?;
        Ok(out.status.success())
    }

    /// The trees (ids) of three revisions, with one `git rev-parse`.
    fn rev_parse_trees(&self, revs: [String; 3]) -> Result<[String; 3], CheckpointError> {
        let out = self.git.cmd(["rev-parse"]).args(&revs).run()?;
        let text = String::from_utf8_lossy(&out);
        let ids: Vec<&str> = text.lines().map(str::trim).collect();
        match ids.as_slice() {
            [a, b, c] => Ok([(*a).to_owned(), (*b).to_owned(), (*c).to_owned()]),
            _ => Err(CheckpointError::Unexpected {
                command: format!("git rev-parse {}", revs.join(" ")),
                output: text.into_owned(),
            }),
        }
    }

    fn hash_object(&self, bytes: &[u8]) -> Result<String, CheckpointError> {
        let out = self
            .git
            .cmd(["hash-object", "-w", "--no-filters", "--stdin"])
            .stdin(bytes.to_vec())
            .run()?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }
}
