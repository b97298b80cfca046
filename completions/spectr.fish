# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_spectr_global_optspecs
    string join \n h/help V/version
end

function __fish_spectr_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_spectr_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_spectr_using_subcommand
    set -l cmd (__fish_spectr_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c spectr -n "__fish_spectr_needs_command" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_needs_command" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "list" -d 'List active changes with their task progress'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "accept" -d 'Convert a change\'s tasks.md into tasks.jsonc (and split files)'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "ralph" -d 'Run a coding agent over a change\'s tasks, in dependency order'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "task" -d 'Change a task\'s status (for agents run by `spectr ralph`, and people)'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "learn" -d 'Record a learning that every later task of the change is told'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "status" -d 'Show where a change\'s run stands'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "context" -d 'Print a task\'s context again, as in its prompt (for an agent that lost it)'
complete -c spectr -n "__fish_spectr_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c spectr -n "__fish_spectr_using_subcommand list" -l json -d 'Machine-readable output (a JSON array)'
complete -c spectr -n "__fish_spectr_using_subcommand list" -l long -d 'Show each change\'s title (from proposal.md)'
complete -c spectr -n "__fish_spectr_using_subcommand list" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand list" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand accept" -l dry-run -d 'Print what would be written, write nothing'
complete -c spectr -n "__fish_spectr_using_subcommand accept" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand accept" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l agent -d 'Agent CLI to run; default: the first installed of claude, codex, gemini, opencode, copilot, qwen, pi, amp, cursor' -r -f -a "claude\t''
codex\t''
gemini\t''
opencode\t''
amp\t''
cursor\t''
copilot\t''
pi\t''
qwen\t''
custom\t''"
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l agent-cmd -d 'Command line for `--agent custom` (implies it): the prompt goes to stdin, or to a file named where `{prompt_file}` appears' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l agent-arg -d 'Extra argument passed to the agent CLI (repeatable)' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l model -d 'Model name passed to the agent CLI' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l max-turns -d 'Turn limit per attempt (Claude Code\'s --max-turns), 1 to 10000' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l max-budget-usd -d 'Spending limit per attempt in USD (Claude Code\'s --max-budget-usd), above 0' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -s j -l jobs -d 'Tasks run at once, each independent lane (1.x, 2.x, ...) in a git work tree of its own, merged back task by task; 0 = one per lane, up to the number of CPUs [default: 1]' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l max-retries -d 'Retries per task after its first attempt, 0 to 1000 [default: 3]' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l command-timeout -d 'Timeout for each git command, in seconds (1 to 604800, i.e. 7 days) [default: 30]' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l task-timeout -d 'Timeout for one attempt at a task (e.g. 30m, 1h, 90s; 1s to 7d) [default: 30m]' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l idle-timeout -d 'Stop an attempt whose agent prints nothing for this long (e.g. 5m; 1s to 7d)' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l verify -d 'A command that must pass before a task counts as completed' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l lane-setup -d 'With --jobs: a command run with `sh -c` in each new lane work tree before its first task (e.g. `npm ci`); its failure stops the run' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l lane-setup-timeout -d 'Timeout for the lane setup command (1s to 7d) [default: 10m]' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l on-exhaust -d 'What to do when a task\'s retries run out' -r -f -a "prompt\t'Ask retry / skip / abort (needs a terminal; abort without one)'
retry\t'Retry the task again, with a fresh retry budget'
skip\t'Skip the task and the tasks that depend on it'
abort\t'Stop the run'"
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l completion-grace -d 'How long an agent may keep running once its task is marked completed (0s to 1h)' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l kill-grace -d 'How long a stopped agent gets between SIGTERM and SIGKILL (0s to 1h)' -r
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l no-checkpoint -d 'Run without git checkpoints (no revert on failure)'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l dry-run -d 'Print the plan (order, lanes, what would be skipped) and exit'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l json -d 'NDJSON events on stdout instead of human output'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -s v -l verbose -d 'Also show spectr\'s bookkeeping: transcript paths, work trees, checkpoint refs, status changes, merges and retries (always in --json and the transcripts)'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -s i -l interactive -d 'Choose the tasks to run before starting'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l resume -d 'Resume the saved session (`<change>/.ralph-session.json`) without asking'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l fresh -d 'Discard a saved session without asking'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -l rewind -d 'On resume, revert an interrupted attempt even when HEAD moved since its checkpoint (commits made since stay reachable from its failed ref)'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -s y -l yes -d 'Start without showing the plan and asking `Start? [Y/n]`'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c spectr -n "__fish_spectr_using_subcommand ralph" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand completions" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand completions" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand task; and not __fish_seen_subcommand_from done help" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand task; and not __fish_seen_subcommand_from done help" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand task; and not __fish_seen_subcommand_from done help" -f -a "done" -d 'Mark a task completed (or another status): one value changes, atomically'
complete -c spectr -n "__fish_spectr_using_subcommand task; and not __fish_seen_subcommand_from done help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c spectr -n "__fish_spectr_using_subcommand task; and __fish_seen_subcommand_from done" -l status -d 'The status to set' -r -f -a "pending\t''
in_progress\t''
completed\t''"
complete -c spectr -n "__fish_spectr_using_subcommand task; and __fish_seen_subcommand_from done" -l change -d 'The change; default: $SPECTR_RALPH_CHANGE, else the only change with an unfinished run, else the only active change' -r
complete -c spectr -n "__fish_spectr_using_subcommand task; and __fish_seen_subcommand_from done" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand task; and __fish_seen_subcommand_from done" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand task; and __fish_seen_subcommand_from help" -f -a "done" -d 'Mark a task completed (or another status): one value changes, atomically'
complete -c spectr -n "__fish_spectr_using_subcommand task; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c spectr -n "__fish_spectr_using_subcommand learn" -l change -d 'The change; default as for `spectr task done`' -r
complete -c spectr -n "__fish_spectr_using_subcommand learn" -l task -d 'The task it came from; default: the task the run is working on' -r
complete -c spectr -n "__fish_spectr_using_subcommand learn" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand learn" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand status" -l change -d 'The change; default as for `spectr task done`' -r
complete -c spectr -n "__fish_spectr_using_subcommand status" -l json -d 'One JSON object instead of lines'
complete -c spectr -n "__fish_spectr_using_subcommand status" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand status" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand context" -l change -d 'The change; default as for `spectr task done`' -r
complete -c spectr -n "__fish_spectr_using_subcommand context" -l task -d 'The task; default: the task the run gave this agent, else the one task the run has under way' -r
complete -c spectr -n "__fish_spectr_using_subcommand context" -s h -l help -d 'Print help'
complete -c spectr -n "__fish_spectr_using_subcommand context" -s V -l version -d 'Print version'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "list" -d 'List active changes with their task progress'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "accept" -d 'Convert a change\'s tasks.md into tasks.jsonc (and split files)'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "ralph" -d 'Run a coding agent over a change\'s tasks, in dependency order'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "completions" -d 'Print a shell completion script'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "task" -d 'Change a task\'s status (for agents run by `spectr ralph`, and people)'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "learn" -d 'Record a learning that every later task of the change is told'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "status" -d 'Show where a change\'s run stands'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "context" -d 'Print a task\'s context again, as in its prompt (for an agent that lost it)'
complete -c spectr -n "__fish_spectr_using_subcommand help; and not __fish_seen_subcommand_from list accept ralph completions task learn status context help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c spectr -n "__fish_spectr_using_subcommand help; and __fish_seen_subcommand_from task" -f -a "done" -d 'Mark a task completed (or another status): one value changes, atomically'
