complete --keep-order --exclusive --command spectr --arguments "(SPECTR_COMPLETE=fish spectr -- (commandline --current-process --tokenize --cut-at-cursor) (commandline --current-token))"
