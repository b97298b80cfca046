//! Loading a spectr change: `tasks.jsonc`, its `$ref` children followed
//! recursively, then files matched by `includes` that name a known `parent`.

use super::parse::parse_file_with;
use super::raw::{Children, RawEntry, RawFile, Statuses};
use super::{MAX_DEPTH, Task, TaskSet, TasksFile, TasksFormat};
use crate::model::error::{FileDiag, ModelError};
use crate::model::id::IdMap;
use crate::model::{TaskId, TaskStatus};
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

pub(super) const ROOT_FILE: &str = "tasks.jsonc";

/// Reads a tasks file as UTF-8 text, naming the file in any error (and the
/// line and column of the first byte that is not UTF-8).
pub(crate) fn read_text(path: &Path) -> Result<String, ModelError> {
    let bytes = std::fs::read(path).map_err(|e| ModelError::io("read", path, e))?;
    crate::model::error::decode_utf8(path, bytes).map_err(ModelError::Encoding)
}

struct Node {
    id: String,
    section: String,
    description: String,
    status: TaskStatus,
    file: usize,
    line: usize,
    parent: Option<usize>,
    children: Vec<usize>,
}

struct Loader<'a> {
    change_dir: &'a Path,
    canon_dir: Option<PathBuf>,
    files: Vec<TasksFile>,
    /// Per file, a (byte offset, 1-based line) cursor: tasks come mostly in
    /// file order, so each line number costs only the bytes since the last.
    line_cursor: Vec<(usize, usize)>,
    by_rel: HashMap<String, usize>,
    nodes: Vec<Node>,
    /// id -> node index. Lookup only; never iterated.
    ids: IdMap<String, usize>,
    /// Files whose `$ref`s are being followed: a `$ref` back to one is a cycle.
    stack: Vec<usize>,
    includes: Vec<(usize, String, Range<usize>)>,
    statuses: Statuses,
    /// Unknown statuses read as pending ([`Statuses::Lenient`]).
    unknown_statuses: Vec<FileDiag>,
}

pub(super) fn load_jsonc(change_dir: &Path) -> Result<TaskSet, ModelError> {
    load_jsonc_with(change_dir, Statuses::Strict).map(|(set, _)| set)
}

/// [`load_jsonc`], with unknown statuses taken as `statuses` says; returns
/// the ones read as pending.
pub(super) fn load_jsonc_with(
    change_dir: &Path,
    statuses: Statuses,
) -> Result<(TaskSet, Vec<FileDiag>), ModelError> {
    let mut loader = Loader {
        change_dir,
        canon_dir: std::fs::canonicalize(change_dir).ok(),
        files: Vec::new(),
        line_cursor: Vec::new(),
        by_rel: HashMap::new(),
        nodes: Vec::new(),
        ids: IdMap::default(),
        stack: Vec::new(),
        includes: Vec::new(),
        statuses,
        unknown_statuses: Vec::new(),
    };
    let root_path = change_dir.join(ROOT_FILE);
    let (text, mut raw) = loader.read_and_parse(&root_path)?;
    let root = loader.add_file(ROOT_FILE.to_string(), root_path, text, &mut raw);
    loader.stack.push(root);
    loader.add_entries(raw.entries, root, None, 0)?;
    loader.stack.pop();
    loader.follow_includes()?;
    let unknown = std::mem::take(&mut loader.unknown_statuses);
    Ok((loader.finish(), unknown))
}

impl Loader<'_> {
    /// A file's text and what it parses to.
    fn read_and_parse(&mut self, path: &Path) -> Result<(String, RawFile), ModelError> {
        let text = read_text(path)?;
        let raw = parse_file_with(path, &text, self.statuses)?;
        Ok((text, raw))
    }

    fn add_file(
        &mut self,
        rel: String,
        path: PathBuf,
        content: String,
        raw: &mut RawFile,
    ) -> usize {
        let idx = self.files.len();
        // Only files that are part of the change count (not stale includes).
        self.unknown_statuses.append(&mut raw.unknown_statuses);
        for (pattern, range) in &raw.includes {
            self.includes.push((idx, pattern.clone(), range.clone()));
        }
        self.by_rel.insert(rel.clone(), idx);
        self.line_cursor.push((0, 1));
        self.files.push(TasksFile { path, rel, content });
        idx
    }

    /// 1-based line of byte `at` in file `file`.
    fn line_at(&mut self, file: usize, at: usize) -> usize {
        let bytes = self.files[file].content.as_bytes();
        let at = at.min(bytes.len());
        let (pos, line) = self.line_cursor[file];
        let newlines = |r: &[u8]| r.iter().filter(|&&b| b == b'\n').count();
        let line = if at >= pos {
            line + newlines(&bytes[pos..at])
        } else {
            line - newlines(&bytes[at..pos])
        };
        self.line_cursor[file] = (at, line);
        line
    }

    fn diag(
        &self,
        file: usize,
        range: Range<usize>,
        message: String,
        label: &str,
        help: &str,
    ) -> Box<FileDiag> {
        let f = &self.files[file];
        Box::new(FileDiag::new(
            &f.path,
            &f.content,
            range.start,
            range.end,
            message,
            label,
            help,
        ))
    }

    fn add_entries(
        &mut self,
        entries: Vec<RawEntry>,
        file: usize,
        parent: Option<usize>,
        depth: usize,
    ) -> Result<(), ModelError> {
        if depth > MAX_DEPTH {
            let at = entries.first().map_or(0..0, |e| e.id_range.clone());
            return Err(ModelError::Invalid(self.diag(
                file,
                at,
                "tasks nested too deep".to_string(),
                "too deep",
                "flatten the task tree",
            )));
        }
        for e in entries {
            let idx = self.nodes.len();
            // One hash per id: insert, and on a clash put the first back.
            if let Some(first) = self.ids.insert(e.id.clone(), idx) {
                self.ids.insert(e.id.clone(), first);
                let f = &self.nodes[first];
                let where_ = format!("{}:{}", self.files[f.file].rel, f.line);
                return Err(ModelError::DuplicateId(self.diag(
                    file,
                    e.id_range.clone(),
                    format!("duplicate task id \"{}\" (first defined at {where_})", e.id),
                    "defined again here",
                    "give each task a unique id",
                )));
            }
            let line = self.line_at(file, e.id_range.start);
            self.nodes.push(Node {
                id: e.id,
                section: e.section,
                description: e.description,
                status: e.status,
                file,
                line,
                parent,
                children: Vec::new(),
            });
            if let Some(p) = parent {
                self.nodes[p].children.push(idx);
            }
            match e.children {
                Children::None => {}
                Children::Inline(kids) => self.add_entries(kids, file, Some(idx), depth + 1)?,
                Children::Ref { target, range } => {
                    self.follow_ref(file, idx, &target, range, depth + 1)?
                }
            }
        }
        Ok(())
    }

    fn follow_ref(
        &mut self,
        from: usize,
        node: usize,
        target: &str,
        range: Range<usize>,
        depth: usize,
    ) -> Result<(), ModelError> {
        let escapes = |this: &Self| {
            ModelError::RefEscapes(this.diag(
                from,
                range.clone(),
                format!("$ref \"{target}\" leaves the change folder"),
                "outside the change folder",
                "reference a file inside the change folder, e.g. \"$ref:tasks-1.jsonc\"",
            ))
        };
        let Some(rel) = normalize_rel(target) else {
            return Err(escapes(self));
        };
        if let Some(&seen) = self.by_rel.get(&rel) {
            if let Some(pos) = self.stack.iter().position(|&f| f == seen) {
                let mut chain: Vec<&str> = self.stack[pos..]
                    .iter()
                    .map(|&f| self.files[f].rel.as_str())
                    .collect();
                chain.push(&rel);
                return Err(ModelError::RefCycle(self.diag(
                    from,
                    range,
                    format!("$ref cycle: {}", chain.join(" -> ")),
                    "refers back to a file being read",
                    "remove the $ref that points back up the chain",
                )));
            }
            return Err(ModelError::Invalid(self.diag(
                from,
                range,
                format!("{rel} is referenced twice"),
                "second reference",
                "each tasks file holds the children of exactly one task",
            )));
        }
        let path = self.change_dir.join(&rel);
        if let Some(e) = crate::model::error::not_a_file(&path) {
            let ModelError::NotAFile { what, .. } = e else {
                return Err(e);
            };
            return Err(ModelError::RefMissing(self.diag(
                from,
                range,
                format!("$ref file {rel} is {what}, not a file"),
                "not a file",
                &format!("replace {rel} with a regular tasks file, or fix the $ref"),
            )));
        }
        if !path.is_file() {
            return Err(ModelError::RefMissing(self.diag(
                from,
                range,
                format!("$ref file {rel} not found"),
                "no such file",
                &format!("create {rel} in the change folder or fix the $ref"),
            )));
        }
        // A symlink can lead out even when the path text does not. Only
        // resolve the path when some component of it is a link (rare).
        let mut probe = self.change_dir.to_path_buf();
        let linked = rel.split('/').any(|part| {
            probe.push(part);
            std::fs::symlink_metadata(&probe).is_ok_and(|m| m.file_type().is_symlink())
        });
        if linked
            && let (Some(dir), Ok(real)) = (&self.canon_dir, std::fs::canonicalize(&path))
            && !real.starts_with(dir)
        {
            return Err(escapes(self));
        }
        let (text, mut raw) = self.read_and_parse(&path)?;
        let idx = self.add_file(rel, path, text, &mut raw);
        if let Some((parent, prange)) = &raw.parent
            && parent != &self.nodes[node].id
        {
            return Err(ModelError::Invalid(self.diag(
                idx,
                prange.clone(),
                format!(
                    "parent \"{parent}\" does not match task \"{}\" that references this file",
                    self.nodes[node].id
                ),
                "wrong parent",
                &format!("set \"parent\": \"{}\"", self.nodes[node].id),
            )));
        }
        self.stack.push(idx);
        self.add_entries(raw.entries, idx, Some(node), depth)?;
        self.stack.pop();
        Ok(())
    }

    /// Files matched by an `includes` pattern and not reached by a `$ref` are
    /// attached under the task their `parent` names. One whose parent is not a
    /// task (a stale split file upstream left behind) is left out.
    fn follow_includes(&mut self) -> Result<(), ModelError> {
        if self.includes.is_empty() {
            return Ok(());
        }
        let mut found = Vec::new();
        list_jsonc(self.change_dir, "", 0, &mut found)?;
        found.retain(|rel| !self.by_rel.contains_key(rel));
        if found.is_empty() {
            return Ok(()); // every file is already reached by a `$ref`
        }
        found.sort();
        let mut builder = globset::GlobSetBuilder::new();
        for (file, pattern, range) in &self.includes {
            let glob = globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| {
                    ModelError::Invalid(self.diag(
                        *file,
                        range.clone(),
                        format!("bad `includes` pattern: {e}"),
                        "bad pattern",
                        "write a glob relative to the change folder, e.g. \"tasks-*.jsonc\"",
                    ))
                })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| {
            ModelError::io(
                "match includes in",
                self.change_dir,
                std::io::Error::other(e.to_string()),
            )
        })?;
        let mut pending: Vec<String> = found.into_iter().filter(|rel| set.is_match(rel)).collect();
        let mut parsed: HashMap<String, (String, RawFile)> = HashMap::new();
        // Included files may hang under each other: attach until nothing moves.
        loop {
            let mut progressed = false;
            let mut rest = Vec::new();
            for rel in pending {
                let path = self.change_dir.join(&rel);
                let (text, mut raw) = match parsed.remove(&rel) {
                    Some(p) => p,
                    None => self.read_and_parse(&path)?,
                };
                let parent = raw
                    .parent
                    .as_ref()
                    .and_then(|(p, _)| self.ids.get(p).copied());
                match parent {
                    Some(node) => {
                        let idx = self.add_file(rel, path, text, &mut raw);
                        self.stack.push(idx);
                        self.add_entries(raw.entries, idx, Some(node), 1)?;
                        self.stack.pop();
                        progressed = true;
                    }
                    None => {
                        parsed.insert(rel.clone(), (text, raw));
                        rest.push(rel);
                    }
                }
            }
            pending = rest;
            if !progressed || pending.is_empty() {
                return Ok(());
            }
        }
    }

    fn finish(self) -> TaskSet {
        let Loader {
            change_dir,
            files,
            nodes,
            ..
        } = self;
        let mut ids = Vec::with_capacity(nodes.len());
        let mut rest = Vec::with_capacity(nodes.len());
        for n in nodes {
            ids.push(TaskId::new(n.id));
            rest.push((
                n.section,
                n.description,
                n.status,
                n.file,
                n.line,
                n.parent,
                n.children,
            ));
        }
        // Files are usually written in id order: check before sorting.
        let sort = |v: &mut Vec<usize>| {
            if !v.is_sorted_by(|&a, &b| ids[a] <= ids[b]) {
                v.sort_by(|&a, &b| ids[a].cmp(&ids[b]));
            }
        };
        let mut roots: Vec<usize> = (0..rest.len()).filter(|&i| rest[i].5.is_none()).collect();
        sort(&mut roots);
        for r in &mut rest {
            sort(&mut r.6);
        }
        // Pre-order: a container, then its children, siblings in id order.
        let mut order = Vec::with_capacity(rest.len());
        let mut stack: Vec<usize> = roots.into_iter().rev().collect();
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend(rest[i].6.iter().rev());
        }
        let mut tasks: Vec<Task> = order
            .iter()
            .map(|&i| {
                let (section, description, status, file, line, parent, kids) = &mut rest[i];
                Task {
                    id: TaskId::new(String::new()), // moved in below
                    section: std::mem::take(section),
                    description: std::mem::take(description),
                    status: *status,
                    file: *file,
                    line: *line,
                    parent: parent.map(|p| ids[p].clone()),
                    children: kids.iter().map(|&c| ids[c].clone()).collect(),
                }
            })
            .collect();
        for (t, &i) in tasks.iter_mut().zip(&order) {
            t.id = std::mem::replace(&mut ids[i], TaskId::new(String::new()));
        }
        TaskSet::new(
            change_dir.to_path_buf(),
            TasksFormat::SpectrJsonc,
            files,
            tasks,
        )
    }
}

/// `target` as a clean relative path inside the change folder (`/`-separated),
/// or `None` when it is absolute or climbs out with `..`.
fn normalize_rel(target: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in Path::new(target).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?.to_string()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Collects `.jsonc` files under `dir` (relative, `/`-separated), skipping
/// hidden entries and symlinked folders, to a bounded depth.
fn list_jsonc(
    base: &Path,
    rel: &str,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<(), ModelError> {
    let dir = if rel.is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| ModelError::io("list", &dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ModelError::io("list", &dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if depth < 6 {
                list_jsonc(base, &child, depth + 1, out)?;
            }
        } else if name.ends_with(".jsonc") {
            out.push(child);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::normalize_rel;

    #[test]
    fn normalize() {
        assert_eq!(
            normalize_rel("tasks-1.jsonc").as_deref(),
            Some("tasks-1.jsonc")
        );
        assert_eq!(
            normalize_rel("./a/../tasks-1.jsonc").as_deref(),
            Some("tasks-1.jsonc")
        );
        assert_eq!(
            normalize_rel("specs/x/tasks.jsonc").as_deref(),
            Some("specs/x/tasks.jsonc")
        );
        assert_eq!(normalize_rel("../other/tasks.jsonc"), None);
        assert_eq!(normalize_rel("a/../../x"), None);
        assert_eq!(normalize_rel("/etc/passwd"), None);
        assert_eq!(normalize_rel("."), None);
    }
}
