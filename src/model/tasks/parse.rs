//! One tasks.jsonc file -> its entries, with the byte ranges of the values we
//! report errors on and edit in place.

use super::raw::{Children, RawEntry, RawFile, Statuses};
use crate::model::TaskStatus;
use crate::model::error::{FileDiag, ModelError};
use jsonc_parser::ast::{Array, Object, ObjectProp, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions};
use std::ops::Range;
use std::path::Path;

/// Only comments and trailing commas beyond strict JSON: upstream reads these
/// files with a JSON decoder, so anything looser would be a file it can't read.
fn parse_options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: true,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

const STATUS_HELP: &str = "use one of \"pending\", \"in_progress\", \"completed\"";

/// The help for an unknown status, naming the likely intended one.
fn status_help(value: &str) -> String {
    let key: String = value
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == '-' || c == ' ' { '_' } else { c })
        .collect();
    let meant = match key.as_str() {
        "complete" | "done" | "finished" | "closed" => "completed",
        "in_progres" | "inprogress" | "started" | "doing" | "active" | "wip" | "running" => {
            "in_progress"
        }
        "todo" | "open" | "not_started" | "new" => "pending",
        _ => return STATUS_HELP.to_string(),
    };
    format!("did you mean \"{meant}\"? {STATUS_HELP}")
}

/// Parses `text` (the content of `path`). Every error names the file, line and
/// column; no input panics.
pub(crate) fn parse_file(path: &Path, text: &str) -> Result<RawFile, ModelError> {
    parse_file_with(path, text, Statuses::Strict)
}

/// [`parse_file`], taking unknown statuses as `statuses` says.
pub(crate) fn parse_file_with(
    path: &Path,
    text: &str,
    statuses: Statuses,
) -> Result<RawFile, ModelError> {
    match super::fast::parse(text) {
        Some(file) => Ok(file),
        None => parse_ast(path, text, statuses),
    }
}

/// What to do about a syntax error. A file that is valid JSON5 (single quotes,
/// unquoted keys, ...) gets told exactly that: upstream spectr reads JSON with
/// comments and trailing commas, nothing looser.
fn syntax_help(body: &str) -> &'static str {
    // json5's parser recurses per nesting level: only ask it about files as
    // shallow as real tasks files, so no input can overflow the stack.
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for b in body.bytes() {
        match b {
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest <= 32 && body.len() <= 1 << 20 && json5::from_str::<serde_json::Value>(body).is_ok()
    {
        "this is JSON5, which upstream spectr cannot read: double-quote every key and string (comments and trailing commas are fine)"
    } else {
        "fix the JSON here (comments and trailing commas are allowed)"
    }
}

/// [`parse_file`] through jsonc-parser's AST: slower, and the source of every
/// error message.
#[cfg(test)]
pub(crate) fn parse_file_ast(path: &Path, text: &str) -> Result<RawFile, ModelError> {
    parse_ast(path, text, Statuses::Strict)
}

fn parse_ast(path: &Path, text: &str, statuses: Statuses) -> Result<RawFile, ModelError> {
    // A UTF-8 byte-order mark is not JSON; skip it and keep offsets absolute.
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let body = &text[bom..];
    let ctx = Ctx {
        path,
        text,
        base: bom,
        statuses,
        unknown: std::cell::RefCell::new(Vec::new()),
    };
    let parsed = jsonc_parser::parse_to_ast(body, &CollectOptions::default(), &parse_options())
        .map_err(|e| {
            let r = e.range();
            let (start, end) = (bom + r.start, bom + r.end.max(r.start + 1));
            ModelError::Syntax(Box::new(FileDiag::new(
                path,
                text,
                start,
                end,
                format!("syntax error: {}", e.kind()),
                e.kind().to_string(),
                syntax_help(body),
            )))
        })?;
    let Some(root) = parsed.value else {
        return Err(ctx.invalid(
            0..text.len(),
            "the file is empty",
            "expected an object",
            "a tasks file is an object: { \"version\": 1, \"tasks\": [ ... ] }",
        ));
    };
    let Value::Object(root) = root else {
        return Err(ctx.invalid(
            ctx.range(&root),
            "expected an object with a `tasks` array",
            "not an object",
            "a tasks file is an object: { \"version\": 1, \"tasks\": [ ... ] }",
        ));
    };
    ctx.file(&root)
}

struct Ctx<'p, 't> {
    path: &'p Path,
    text: &'t str,
    /// Offset of the parsed body in `text` (a skipped BOM).
    base: usize,
    statuses: Statuses,
    /// Unknown statuses read as pending (lenient mode).
    unknown: std::cell::RefCell<Vec<FileDiag>>,
}

impl Ctx<'_, '_> {
    fn range(&self, node: &impl Ranged) -> Range<usize> {
        let r = node.range();
        self.base + r.start..self.base + r.end
    }

    fn diag(&self, range: Range<usize>, message: String, label: &str, help: &str) -> Box<FileDiag> {
        Box::new(FileDiag::new(
            self.path,
            self.text,
            range.start,
            range.end,
            message,
            label,
            help,
        ))
    }

    fn invalid(&self, range: Range<usize>, message: &str, label: &str, help: &str) -> ModelError {
        ModelError::Invalid(self.diag(range, message.to_string(), label, help))
    }

    fn file(&self, root: &Object<'_>) -> Result<RawFile, ModelError> {
        let mut tasks = None;
        let mut parent = None;
        let mut includes = Vec::new();
        for prop in &root.properties {
            match prop.name.as_str() {
                "tasks" => {
                    let Value::Array(arr) = &prop.value else {
                        return Err(self.invalid(
                            self.range(&prop.value),
                            "expected an array `tasks`",
                            "not an array",
                            "`tasks` is a list of task objects: \"tasks\": [ { \"id\": \"1.1\", ... } ]",
                        ));
                    };
                    tasks = Some(arr);
                }
                "parent" => parent = Some(self.id_value(prop, "parent")?),
                "includes" => includes = self.includes(prop)?,
                _ => {} // version, summary and fields we don't know: not ours to judge
            }
        }
        let Some(tasks) = tasks else {
            let start = self.range(root).start;
            return Err(self.invalid(
                start..start + 1,
                "expected an array `tasks`",
                "this object has no `tasks`",
                "add \"tasks\": [ ... ] to the top-level object",
            ));
        };
        let entries = self.entries(tasks, 0)?;
        Ok(RawFile {
            parent,
            includes,
            entries,
            unknown_statuses: self.unknown.take(),
        })
    }

    fn includes(&self, prop: &ObjectProp<'_>) -> Result<Vec<(String, Range<usize>)>, ModelError> {
        let help = "`includes` is a list of glob patterns: \"includes\": [\"tasks-*.jsonc\"]";
        let Value::Array(arr) = &prop.value else {
            return Err(self.invalid(
                self.range(&prop.value),
                "expected an array of strings `includes`",
                "not an array",
                help,
            ));
        };
        arr.elements
            .iter()
            .map(|v| match v {
                Value::StringLit(s) => Ok((s.value.to_string(), self.range(s))),
                other => Err(self.invalid(
                    self.range(other),
                    "expected a string in `includes`",
                    "not a string",
                    help,
                )),
            })
            .collect()
    }

    fn entries(&self, arr: &Array<'_>, depth: usize) -> Result<Vec<RawEntry>, ModelError> {
        arr.elements.iter().map(|v| self.entry(v, depth)).collect()
    }

    fn entry(&self, value: &Value<'_>, depth: usize) -> Result<RawEntry, ModelError> {
        let Value::Object(obj) = value else {
            return Err(self.invalid(
                self.range(value),
                "expected a task object",
                "not an object",
                "each task is an object: { \"id\": \"1.1\", \"description\": \"...\", \"status\": \"pending\" }",
            ));
        };
        let mut id = None;
        let mut section = String::new();
        let mut description = String::new();
        let mut status = None;
        let mut children = None;
        for prop in &obj.properties {
            let name = prop.name.as_str();
            let seen = match name {
                "id" => id.is_some(),
                "status" => status.is_some(),
                "children" => children.is_some(),
                _ => false,
            };
            if seen {
                // Two values for one key: which one counts (and which one an
                // edit should change) would be a guess.
                return Err(self.invalid(
                    self.range(prop),
                    &format!("duplicate key `{name}` in one task"),
                    "second occurrence",
                    "keep one of the two",
                ));
            }
            match name {
                "id" => id = Some(self.id_value(prop, "id")?),
                "section" => section = self.text_value(prop)?,
                "description" => description = self.text_value(prop)?,
                "status" => status = Some(self.status(prop)?),
                "children" => children = Some(self.children(prop, depth)?),
                _ => {}
            }
        }
        let Some((id, id_range)) = id else {
            let start = self.range(obj).start;
            return Err(self.invalid(
                start..start + 1,
                "task has no `id`",
                "this task",
                "add an id such as \"id\": \"1.1\"",
            ));
        };
        let (status, status_range) = match status {
            Some((s, r)) => (s, Some(r)),
            None => (TaskStatus::Pending, None),
        };
        Ok(RawEntry {
            id,
            id_range,
            section,
            description,
            status,
            status_range,
            children: children.unwrap_or(Children::None),
        })
    }

    /// A task id (`id` or `parent`): a non-empty string; a bare number is taken
    /// as its text.
    fn id_value(
        &self,
        prop: &ObjectProp<'_>,
        key: &str,
    ) -> Result<(String, Range<usize>), ModelError> {
        let range = self.range(&prop.value);
        let id = match &prop.value {
            Value::StringLit(s) => s.value.to_string(),
            Value::NumberLit(n) => n.value.to_string(),
            _ => {
                return Err(self.invalid(
                    range,
                    &format!("`{key}` must be a string"),
                    "not a string",
                    "write the id as a string, e.g. \"1.2\"",
                ));
            }
        };
        if id.trim().is_empty() {
            return Err(ModelError::EmptyId(self.diag(
                range,
                format!("empty task id in `{key}`"),
                "empty id",
                "give the task an id such as \"1.1\"",
            )));
        }
        if id.chars().any(char::is_control) {
            // Ids are printed everywhere ([1.2] prefixes, refs, prompts).
            return Err(self.invalid(
                range,
                &format!("`{key}` holds a control character"),
                "control character",
                "a task id is a short name such as \"1.2\": remove the control character",
            ));
        }
        Ok((id, range))
    }

    fn text_value(&self, prop: &ObjectProp<'_>) -> Result<String, ModelError> {
        match &prop.value {
            Value::StringLit(s) => Ok(s.value.to_string()),
            Value::NullKeyword(_) => Ok(String::new()),
            other => Err(self.invalid(
                self.range(other),
                &format!("`{}` must be a string", prop.name.as_str()),
                "not a string",
                "write it as a string in double quotes",
            )),
        }
    }

    fn status(&self, prop: &ObjectProp<'_>) -> Result<(TaskStatus, Range<usize>), ModelError> {
        let range = self.range(&prop.value);
        let parsed = match &prop.value {
            Value::StringLit(s) => TaskStatus::parse(&s.value),
            _ => None,
        };
        match parsed {
            Some(status) => Ok((status, range)),
            None => {
                let shown = self.text.get(range.clone()).unwrap_or("");
                let help = match &prop.value {
                    Value::StringLit(s) => status_help(&s.value),
                    _ => STATUS_HELP.to_string(),
                };
                let diag = self.diag(
                    range.clone(),
                    format!("unknown status {shown}"),
                    "unknown status",
                    &help,
                );
                if self.statuses == Statuses::Lenient {
                    self.unknown.borrow_mut().push(*diag);
                    return Ok((TaskStatus::Pending, range));
                }
                Err(ModelError::UnknownStatus(diag))
            }
        }
    }

    fn children(&self, prop: &ObjectProp<'_>, depth: usize) -> Result<Children, ModelError> {
        let range = self.range(&prop.value);
        match &prop.value {
            Value::NullKeyword(_) => Ok(Children::None),
            Value::StringLit(s) => match s.value.strip_prefix("$ref:") {
                Some(target) if !target.trim().is_empty() => Ok(Children::Ref {
                    target: target.trim().to_string(),
                    range,
                }),
                _ => Err(self.invalid(
                    range,
                    "`children` must be \"$ref:FILE\" or an array of tasks",
                    "not a $ref",
                    "write \"children\": \"$ref:tasks-1.jsonc\" (a path relative to the change folder)",
                )),
            },
            Value::Array(arr) => {
                if depth >= super::MAX_DEPTH {
                    return Err(self.invalid(
                        range,
                        "tasks nested too deep",
                        "too deep",
                        "flatten the task tree",
                    ));
                }
                Ok(Children::Inline(self.entries(arr, depth + 1)?))
            }
            other => Err(self.invalid(
                self.range(other),
                "`children` must be \"$ref:FILE\" or an array of tasks",
                "not a $ref",
                "write \"children\": \"$ref:tasks-1.jsonc\" (a path relative to the change folder)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tasks::raw::walk;

    fn parse(text: &str) -> Result<RawFile, ModelError> {
        parse_file_ast(Path::new("t.jsonc"), text)
    }

    #[test]
    fn comments_trailing_commas_unknown_fields() {
        let f = parse(
            "// head\n{ /* c */ \"version\": 2, \"x\": {\"y\": [1]},\n \"tasks\": [\n {\"id\": \"1\", \"status\": \"completed\", \"extra\": true,},\n ], \"parent\": \"7\", \"includes\": [\"a*.jsonc\"],}\n",
        )
        .unwrap();
        assert_eq!(f.entries.len(), 1);
        assert_eq!(f.entries[0].id, "1");
        assert_eq!(f.entries[0].status, TaskStatus::Completed);
        assert_eq!(f.parent.as_ref().map(|p| p.0.as_str()), Some("7"));
        assert_eq!(f.includes[0].0, "a*.jsonc");
    }

    #[test]
    fn status_range_covers_the_literal() {
        let text = "{\"tasks\":[{\"id\":\"1\",\"status\":\"pending\"}]}";
        let f = parse(text).unwrap();
        let r = f.entries[0].status_range.clone().unwrap();
        assert_eq!(&text[r], "\"pending\"");
    }

    #[test]
    fn bom_is_skipped_and_offsets_stay_absolute() {
        let text = "\u{feff}{\"tasks\":[{\"id\":\"1\",\"status\":\"pending\"}]}";
        let f = parse(text).unwrap();
        let r = f.entries[0].status_range.clone().unwrap();
        assert_eq!(&text[r], "\"pending\"");
    }

    #[test]
    fn errors_have_kinds_and_positions() {
        let e = parse("{\n \"tasks\": [ {\"id\": \"1\" \"status\": \"x\"} ]\n}").unwrap_err();
        assert!(matches!(e, ModelError::Syntax(_)), "{e:?}");
        assert_eq!(e.file_diag().unwrap().line, 2);

        let e = parse("{\"tasks\": [{\"id\": \"1\", \"status\": \"done\"}]}").unwrap_err();
        assert!(matches!(e, ModelError::UnknownStatus(_)));
        assert_eq!(e.file_diag().unwrap().snippet(), "\"done\"");
        assert!(e.to_string().contains("unknown status \"done\""));

        let e = parse("{\"tasks\": [{\"id\": \" \"}]}").unwrap_err();
        assert!(matches!(e, ModelError::EmptyId(_)));

        let e = parse("{\"tasks\": {}}").unwrap_err();
        assert!(e.to_string().contains("expected an array `tasks`"), "{e}");
        assert!(e.to_string().starts_with("t.jsonc:1:11"), "{e}");

        let e = parse("[]").unwrap_err();
        assert!(e.to_string().contains("expected an object"), "{e}");

        let e = parse("").unwrap_err();
        assert!(matches!(e, ModelError::Invalid(_)));

        let e = parse(
            "{\"tasks\": [{\"id\": \"1\", \"status\": \"pending\", \"status\": \"completed\"}]}",
        )
        .unwrap_err();
        assert!(e.to_string().contains("duplicate key `status`"), "{e}");

        let e =
            parse("{\"tasks\": [{\"id\": \"1\", \"children\": \"tasks-1.jsonc\"}]}").unwrap_err();
        assert!(e.to_string().contains("$ref:FILE"), "{e}");
    }

    #[test]
    fn inline_children_nest() {
        let f =
            parse("{\"tasks\":[{\"id\":\"1\",\"children\":[{\"id\":\"1.1\"},{\"id\":\"1.2\"}]}]}")
                .unwrap();
        let mut ids = Vec::new();
        walk(&f.entries, &mut |e| ids.push(e.id.clone()));
        assert_eq!(ids, ["1", "1.1", "1.2"]);
    }
}

#[cfg(test)]
mod json5_hint_tests {
    use super::*;

    #[test]
    fn json5_only_syntax_gets_a_precise_hint() {
        let path = Path::new("tasks.jsonc");
        let e = parse_file_ast(path, "{ version: 1, 'tasks': [] }").unwrap_err();
        let help = e.file_diag().map(|d| d.help.clone()).unwrap_or_default();
        assert!(help.contains("JSON5"), "{help}");
        let e = parse_file_ast(path, "{ \"version\": 1, \"tasks\": [ }").unwrap_err();
        let help = e.file_diag().map(|d| d.help.clone()).unwrap_or_default();
        assert!(!help.contains("JSON5"), "{help}");
    }
}
