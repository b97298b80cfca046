
set edit:completion:arg-completer[spectr] = { |@words|
    var index = (count $words)
    set index = (- $index 1)

    put (env _CLAP_IFS="\n" _CLAP_COMPLETE_INDEX=(to-string $index) SPECTR_COMPLETE="elvish" spectr -- $@words) | to-lines
}

