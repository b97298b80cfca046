
use builtin;
use str;

set edit:completion:arg-completer[spectr] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'spectr'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'spectr'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand list 'List active changes with their task progress'
            cand accept 'Convert a change''s tasks.md into tasks.jsonc (and split files)'
            cand ralph 'Run a coding agent over a change''s tasks, in dependency order'
            cand completions 'Print a shell completion script'
            cand task 'Change a task''s status (for agents run by `spectr ralph`, and people)'
            cand learn 'Record a learning that every later task of the change is told'
            cand status 'Show where a change''s run stands'
            cand context 'Print a task''s context again, as in its prompt (for an agent that lost it)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'spectr;list'= {
            cand --json 'Machine-readable output (a JSON array)'
            cand --long 'Show each change''s title (from proposal.md)'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;accept'= {
            cand --dry-run 'Print what would be written, write nothing'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;ralph'= {
            cand --agent 'Agent CLI to run; default: the first installed of claude, codex, gemini, opencode, copilot, qwen, pi, amp, cursor'
            cand --agent-cmd 'Command line for `--agent custom` (implies it): the prompt goes to stdin, or to a file named where `{prompt_file}` appears'
            cand --agent-arg 'Extra argument passed to the agent CLI (repeatable)'
            cand --model 'Model name passed to the agent CLI'
            cand --max-turns 'Turn limit per attempt (Claude Code''s --max-turns), 1 to 10000'
            cand --max-budget-usd 'Spending limit per attempt in USD (Claude Code''s --max-budget-usd), above 0'
            cand -j 'Tasks run at once, each independent lane (1.x, 2.x, ...) in a git work tree of its own, merged back task by task; 0 = one per lane, up to the number of CPUs [default: 1]'
            cand --jobs 'Tasks run at once, each independent lane (1.x, 2.x, ...) in a git work tree of its own, merged back task by task; 0 = one per lane, up to the number of CPUs [default: 1]'
            cand --max-retries 'Retries per task after its first attempt, 0 to 1000 [default: 3]'
            cand --command-timeout 'Timeout for each git command, in seconds (1 to 604800, i.e. 7 days) [default: 30]'
            cand --task-timeout 'Timeout for one attempt at a task (e.g. 30m, 1h, 90s; 1s to 7d) [default: 30m]'
            cand --idle-timeout 'Stop an attempt whose agent prints nothing for this long (e.g. 5m; 1s to 7d)'
            cand --verify 'A command that must pass before a task counts as completed'
            cand --lane-setup 'With --jobs: a command run with `sh -c` in each new lane work tree before its first task (e.g. `npm ci`); its failure stops the run'
            cand --lane-setup-timeout 'Timeout for the lane setup command (1s to 7d) [default: 10m]'
            cand --on-exhaust 'What to do when a task''s retries run out'
            cand --completion-grace 'How long an agent may keep running once its task is marked completed (0s to 1h)'
            cand --kill-grace 'How long a stopped agent gets between SIGTERM and SIGKILL (0s to 1h)'
            cand --no-checkpoint 'Run without git checkpoints (no revert on failure)'
            cand --dry-run 'Print the plan (order, lanes, what would be skipped) and exit'
            cand --json 'NDJSON events on stdout instead of human output'
            cand -v 'Also show spectr''s bookkeeping: transcript paths, work trees, checkpoint refs, status changes, merges and retries (always in --json and the transcripts)'
            cand --verbose 'Also show spectr''s bookkeeping: transcript paths, work trees, checkpoint refs, status changes, merges and retries (always in --json and the transcripts)'
            cand -i 'Choose the tasks to run before starting'
            cand --interactive 'Choose the tasks to run before starting'
            cand --resume 'Resume the saved session (`<change>/.ralph-session.json`) without asking'
            cand --fresh 'Discard a saved session without asking'
            cand --rewind 'On resume, revert an interrupted attempt even when HEAD moved since its checkpoint (commits made since stay reachable from its failed ref)'
            cand -y 'Start without showing the plan and asking `Start? [Y/n]`'
            cand --yes 'Start without showing the plan and asking `Start? [Y/n]`'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;completions'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;task'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand done 'Mark a task completed (or another status): one value changes, atomically'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'spectr;task;done'= {
            cand --status 'The status to set'
            cand --change 'The change; default: $SPECTR_RALPH_CHANGE, else the only change with an unfinished run, else the only active change'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;task;help'= {
            cand done 'Mark a task completed (or another status): one value changes, atomically'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'spectr;task;help;done'= {
        }
        &'spectr;task;help;help'= {
        }
        &'spectr;learn'= {
            cand --change 'The change; default as for `spectr task done`'
            cand --task 'The task it came from; default: the task the run is working on'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;status'= {
            cand --change 'The change; default as for `spectr task done`'
            cand --json 'One JSON object instead of lines'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;context'= {
            cand --change 'The change; default as for `spectr task done`'
            cand --task 'The task; default: the task the run gave this agent, else the one task the run has under way'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'spectr;help'= {
            cand list 'List active changes with their task progress'
            cand accept 'Convert a change''s tasks.md into tasks.jsonc (and split files)'
            cand ralph 'Run a coding agent over a change''s tasks, in dependency order'
            cand completions 'Print a shell completion script'
            cand task 'Change a task''s status (for agents run by `spectr ralph`, and people)'
            cand learn 'Record a learning that every later task of the change is told'
            cand status 'Show where a change''s run stands'
            cand context 'Print a task''s context again, as in its prompt (for an agent that lost it)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'spectr;help;list'= {
        }
        &'spectr;help;accept'= {
        }
        &'spectr;help;ralph'= {
        }
        &'spectr;help;completions'= {
        }
        &'spectr;help;task'= {
            cand done 'Mark a task completed (or another status): one value changes, atomically'
        }
        &'spectr;help;task;done'= {
        }
        &'spectr;help;learn'= {
        }
        &'spectr;help;status'= {
        }
        &'spectr;help;context'= {
        }
        &'spectr;help;help'= {
        }
    ]
    $completions[$command]
}
