
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'spectr' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'spectr'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'spectr' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List active changes with their task progress')
            [CompletionResult]::new('accept', 'accept', [CompletionResultType]::ParameterValue, 'Convert a change''s tasks.md into tasks.jsonc (and split files)')
            [CompletionResult]::new('ralph', 'ralph', [CompletionResultType]::ParameterValue, 'Run a coding agent over a change''s tasks, in dependency order')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('task', 'task', [CompletionResultType]::ParameterValue, 'Change a task''s status (for agents run by `spectr ralph`, and people)')
            [CompletionResult]::new('learn', 'learn', [CompletionResultType]::ParameterValue, 'Record a learning that every later task of the change is told')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show where a change''s run stands')
            [CompletionResult]::new('context', 'context', [CompletionResultType]::ParameterValue, 'Print a task''s context again, as in its prompt (for an agent that lost it)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'spectr;list' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output (a JSON array)')
            [CompletionResult]::new('--long', '--long', [CompletionResultType]::ParameterName, 'Show each change''s title (from proposal.md)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;accept' {
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Print what would be written, write nothing')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;ralph' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Agent CLI to run; default: the first installed of claude, codex, gemini, opencode, copilot, qwen, pi, amp, cursor')
            [CompletionResult]::new('--agent-cmd', '--agent-cmd', [CompletionResultType]::ParameterName, 'Command line for `--agent custom` (implies it): the prompt goes to stdin, or to a file named where `{prompt_file}` appears')
            [CompletionResult]::new('--agent-arg', '--agent-arg', [CompletionResultType]::ParameterName, 'Extra argument passed to the agent CLI (repeatable)')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'Model name passed to the agent CLI')
            [CompletionResult]::new('--max-turns', '--max-turns', [CompletionResultType]::ParameterName, 'Turn limit per attempt (Claude Code''s --max-turns), 1 to 10000')
            [CompletionResult]::new('--max-budget-usd', '--max-budget-usd', [CompletionResultType]::ParameterName, 'Spending limit per attempt in USD (Claude Code''s --max-budget-usd), above 0')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Tasks run at once, each independent lane (1.x, 2.x, ...) in a git work tree of its own, merged back task by task; 0 = one per lane, up to the number of CPUs [default: 1]')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'Tasks run at once, each independent lane (1.x, 2.x, ...) in a git work tree of its own, merged back task by task; 0 = one per lane, up to the number of CPUs [default: 1]')
            [CompletionResult]::new('--max-retries', '--max-retries', [CompletionResultType]::ParameterName, 'Retries per task after its first attempt, 0 to 1000 [default: 3]')
            [CompletionResult]::new('--command-timeout', '--command-timeout', [CompletionResultType]::ParameterName, 'Timeout for each git command, in seconds (1 to 604800, i.e. 7 days) [default: 30]')
            [CompletionResult]::new('--task-timeout', '--task-timeout', [CompletionResultType]::ParameterName, 'Timeout for one attempt at a task (e.g. 30m, 1h, 90s; 1s to 7d) [default: 30m]')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'Stop an attempt whose agent prints nothing for this long (e.g. 5m; 1s to 7d)')
            [CompletionResult]::new('--verify', '--verify', [CompletionResultType]::ParameterName, 'A command that must pass before a task counts as completed')
            [CompletionResult]::new('--lane-setup', '--lane-setup', [CompletionResultType]::ParameterName, 'With --jobs: a command run with `sh -c` in each new lane work tree before its first task (e.g. `npm ci`); its failure stops the run')
            [CompletionResult]::new('--lane-setup-timeout', '--lane-setup-timeout', [CompletionResultType]::ParameterName, 'Timeout for the lane setup command (1s to 7d) [default: 10m]')
            [CompletionResult]::new('--on-exhaust', '--on-exhaust', [CompletionResultType]::ParameterName, 'What to do when a task''s retries run out')
            [CompletionResult]::new('--completion-grace', '--completion-grace', [CompletionResultType]::ParameterName, 'How long an agent may keep running once its task is marked completed (0s to 1h)')
            [CompletionResult]::new('--kill-grace', '--kill-grace', [CompletionResultType]::ParameterName, 'How long a stopped agent gets between SIGTERM and SIGKILL (0s to 1h)')
            [CompletionResult]::new('--no-checkpoint', '--no-checkpoint', [CompletionResultType]::ParameterName, 'Run without git checkpoints (no revert on failure)')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Print the plan (order, lanes, what would be skipped) and exit')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'NDJSON events on stdout instead of human output')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Also show spectr''s bookkeeping: transcript paths, work trees, checkpoint refs, status changes, merges and retries (always in --json and the transcripts)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Also show spectr''s bookkeeping: transcript paths, work trees, checkpoint refs, status changes, merges and retries (always in --json and the transcripts)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Choose the tasks to run before starting')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Choose the tasks to run before starting')
            [CompletionResult]::new('--resume', '--resume', [CompletionResultType]::ParameterName, 'Resume the saved session (`<change>/.ralph-session.json`) without asking')
            [CompletionResult]::new('--fresh', '--fresh', [CompletionResultType]::ParameterName, 'Discard a saved session without asking')
            [CompletionResult]::new('--rewind', '--rewind', [CompletionResultType]::ParameterName, 'On resume, revert an interrupted attempt even when HEAD moved since its checkpoint (commits made since stay reachable from its failed ref)')
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Start without showing the plan and asking `Start? [Y/n]`')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Start without showing the plan and asking `Start? [Y/n]`')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;completions' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;task' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('done', 'done', [CompletionResultType]::ParameterValue, 'Mark a task completed (or another status): one value changes, atomically')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'spectr;task;done' {
            [CompletionResult]::new('--status', '--status', [CompletionResultType]::ParameterName, 'The status to set')
            [CompletionResult]::new('--change', '--change', [CompletionResultType]::ParameterName, 'The change; default: $SPECTR_RALPH_CHANGE, else the only change with an unfinished run, else the only active change')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;task;help' {
            [CompletionResult]::new('done', 'done', [CompletionResultType]::ParameterValue, 'Mark a task completed (or another status): one value changes, atomically')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'spectr;task;help;done' {
            break
        }
        'spectr;task;help;help' {
            break
        }
        'spectr;learn' {
            [CompletionResult]::new('--change', '--change', [CompletionResultType]::ParameterName, 'The change; default as for `spectr task done`')
            [CompletionResult]::new('--task', '--task', [CompletionResultType]::ParameterName, 'The task it came from; default: the task the run is working on')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;status' {
            [CompletionResult]::new('--change', '--change', [CompletionResultType]::ParameterName, 'The change; default as for `spectr task done`')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'One JSON object instead of lines')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;context' {
            [CompletionResult]::new('--change', '--change', [CompletionResultType]::ParameterName, 'The change; default as for `spectr task done`')
            [CompletionResult]::new('--task', '--task', [CompletionResultType]::ParameterName, 'The task; default: the task the run gave this agent, else the one task the run has under way')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'spectr;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List active changes with their task progress')
            [CompletionResult]::new('accept', 'accept', [CompletionResultType]::ParameterValue, 'Convert a change''s tasks.md into tasks.jsonc (and split files)')
            [CompletionResult]::new('ralph', 'ralph', [CompletionResultType]::ParameterValue, 'Run a coding agent over a change''s tasks, in dependency order')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('task', 'task', [CompletionResultType]::ParameterValue, 'Change a task''s status (for agents run by `spectr ralph`, and people)')
            [CompletionResult]::new('learn', 'learn', [CompletionResultType]::ParameterValue, 'Record a learning that every later task of the change is told')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show where a change''s run stands')
            [CompletionResult]::new('context', 'context', [CompletionResultType]::ParameterValue, 'Print a task''s context again, as in its prompt (for an agent that lost it)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'spectr;help;list' {
            break
        }
        'spectr;help;accept' {
            break
        }
        'spectr;help;ralph' {
            break
        }
        'spectr;help;completions' {
            break
        }
        'spectr;help;task' {
            [CompletionResult]::new('done', 'done', [CompletionResultType]::ParameterValue, 'Mark a task completed (or another status): one value changes, atomically')
            break
        }
        'spectr;help;task;done' {
            break
        }
        'spectr;help;learn' {
            break
        }
        'spectr;help;status' {
            break
        }
        'spectr;help;context' {
            break
        }
        'spectr;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
