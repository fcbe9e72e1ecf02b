# Sourced by tests/check_layers.sh and tests/check_headers.sh: the rules of
# tests/layer_rules.txt as both checks read them.
#   RULES       the rule lines, comments dropped
#   KNOWN       the modules the rules name, space-separated
#   RULES_AWK   an awk rule that, fed RULES on standard input ("-", the
#               first file), fills ok[from SUBSEP to] for every allowed edge
# layer_rules_load DIR: DIR is the folder holding layer_rules.txt.
layer_rules_load() {
    RULES=$(grep -v '^#' "$1/layer_rules.txt")
    KNOWN=$(printf '%s\n' "$RULES" | awk -F: 'NF > 1 { printf "%s ", $1 }')
    RULES_AWK='
    FILENAME == "-" {
        if (split($0, kv, ":") < 2) next
        n = split(kv[2], to, " ")
        for (i = 1; i <= n; i++) ok[kv[1] SUBSEP to[i]] = 1
        next
    }'
}
