#!/usr/bin/env bash
# Validate, at admission: refuse a DatabaseTable whose columns have a type
# the model does not know, with a field error per column
# (spec.columns[i].type) that lists the types allowed. Extensions and other
# kinds are allowed as they are.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $(field '.object.kind') == "DatabaseTable" ]] || exit 0
jq --argjson types "$(type_names)" '
    {errors: [.object.spec.columns // [] | to_entries[]
        | select(.value.type as $t | $types | index($t) | not)
        | {path: "spec.columns[\(.key)].type", value: .value.type,
           message: "unknown column type; use one of \($types | join(", "))"}]}
' <<<"$request"
