# shellcheck shell=bash
#
# kcl.sh: a record-processor client library for kcl-daemon (and the Java KCL MultiLangDaemon), in bash + jq.
#
# A processor script sources this file, defines handler functions and calls kcl_run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/kcl.sh"
#   kcl_process_records() {
#     while kcl_next_record; do
#       kcl_log "record $KCL_SEQUENCE_NUMBER from $KCL_PARTITION_KEY"
#     done
#     kcl_checkpoint || kcl_log "checkpoint failed: $KCL_CHECKPOINT_ERROR"
#   }
#   kcl_run
#
# Handlers (define the ones you need; only kcl_process_records is required):
#   kcl_initialize          KCL_SHARD_ID, KCL_INITIAL_SEQUENCE_NUMBER, KCL_INITIAL_SUB_SEQUENCE_NUMBER are set
#                           (and KCL_STREAM_NAME, KCL_STREAM_IDENTIFIER when kcl-daemon reads several streams)
#   kcl_process_records     iterate with kcl_next_record / kcl_each_record, or kcl_records_json | jq ...
#   kcl_lease_lost          no checkpointing possible (the daemon answers InvalidStateException)
#   kcl_shard_ended         must checkpoint; the default does `kcl_checkpoint` (retrying throttling)
#   kcl_shutdown_requested  may checkpoint; the default does nothing
# kcl-daemon's log/metric channel: kcl_channel_log LEVEL MESSAGE, kcl_metric NAME VALUE [UNIT [K=V...]]
#
# Rules the library enforces (see README.md):
#   * kcl_run moves the protocol to private file descriptors and then points stdout at stderr and stdin at
#     /dev/null, so `echo` and commands in handlers can never corrupt the protocol or eat its input.
#   * Handlers run in the main shell (global variables persist between calls). A handler that returns
#     non-zero is logged to stderr and the status is sent anyway. Don't call `exit` in a handler.
#   * bash ignores `set -e` inside a function whose status is tested, and kcl_run tests every handler:
#     check errors in handlers explicitly.
#   * One long-lived jq process parses the input (see kcl_run); nothing from the input is ever evaluated.
#   * Background processes started by a handler inherit the protocol descriptors: don't leave any running
#     when the processor exits, or the daemon keeps waiting for the end of its stdout.
#
# Needs bash >= 4.4 (>= 5.1 reads large batches much faster) and jq >= 1.6; base64 (coreutils) only for
# kcl_record_data and kcl_record_text.

if [[ -z ${BASH_VERSINFO[0]-} ]] || ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4))); then
  printf 'kcl.sh: bash 4.4 or newer is required (this is %s)\n' "${BASH_VERSION:-not bash}" >&2
  # shellcheck disable=SC2317  # exit is reached when the file is run instead of sourced
  return 1 2>/dev/null || exit 1
fi

# ---- Public state (read these in handlers) -------------------------------------------------------------
KCL_ACTION=                         # the action being handled: initialize, processRecords, leaseLost, ...
KCL_SHARD_ID=                       # from initialize; stays set for the life of the process
KCL_INITIAL_SEQUENCE_NUMBER=        # checkpoint the lease started from ("TRIM_HORIZON", "LATEST", a number)
KCL_INITIAL_SUB_SEQUENCE_NUMBER=
KCL_STREAM_NAME=                    # initialize: the shard's stream (kcl-daemon's streamNames); else ""
KCL_STREAM_IDENTIFIER=              # initialize: accountId:streamName:creationEpoch of it; else ""
KCL_MILLIS_BEHIND_LATEST=           # processRecords: "" when the daemon sent null
KCL_RECORD_COUNT=0                  # processRecords: number of records in the batch (0 for other actions)
KCL_RECORD_INDEX=                   # current record (set by kcl_next_record), 0-based
KCL_SEQUENCE_NUMBER=
KCL_SUB_SEQUENCE_NUMBER=
KCL_PARTITION_KEY=
KCL_ARRIVAL_MILLIS=                 # approximateArrivalTimestamp, epoch milliseconds
KCL_DATA_BASE64=                    # the payload, standard padded base64 exactly as received
KCL_CHECKPOINT_ERROR=               # set by kcl_checkpoint: "" on success, else the Java error name

# ---- Private state -------------------------------------------------------------------------------------
_KCL_IN=          # fd the parsed messages arrive on (from the jq reader, see kcl_run)
_KCL_OUT=         # fd protocol messages go out on (the original stdout)
_KCL_EOF=0        # 1 once the input is closed
_KCL_IN_ACTION=0  # 1 while a handler runs: checkpoints are only allowed then
_KCL_MSG=()       # the message being handled, parsed (layout below)
_KCL_RAW=         # ... and its raw line
_KCL_REPLY=()     # the reply to the last checkpoint request, parsed
_KCL_REPLY_RAW=
_KCL_NEXT=0       # index of the record kcl_next_record loads next

# How input is read. bash's `read` takes a pipe one byte per system call, which makes a 14 MB
# processRecords line cost about two seconds of system time. So one long-lived jq process reads stdin
# instead (buffered), parses each line once and passes it on to bash as two frames made for `read -N`,
# which reads a pipe in blocks (bash >= 5.1; older bash is slower but still correct):
#
#   <N>\n<N bytes: the raw line>\n<M>\n<M bytes: the fields, one per line>\n
#
# The raw line is the line as received (for kcl_message_json and kcl_records_json; for a line that is
# not JSON, its first 200 characters). The fields, one array element each:
#   [0] action: a plain word; "?" for JSON without a usable action; "" for a line that is not JSON
#   initialize:      [1] shardId [2] sequenceNumber [3] subSequenceNumber [4] channel offer, comma-joined
#                    [5] streamName [6] streamIdentifier (several streams; "" otherwise)
#   processRecords:  [1] millisBehindLatest [2] record count, then 5 fields per record from [3]:
#                    sequenceNumber, subSequenceNumber, partitionKey, approximateArrivalTimestamp, data
#   checkpoint:      [1] sequenceNumber [2] subSequenceNumber [3] error
# null becomes "". A string holding a backslash, a newline or a NUL is escaped so that it stays on one
# line (NUL dropped, \ -> \\, newline -> \n); _kcl_unescape reverses that. A field without a backslash
# was therefore never escaped. Blank lines produce nothing. Input is never evaluated.
# shellcheck disable=SC2016  # jq's $variables, not the shell's
_KCL_JQ_READER='
def field:
  if . == null then ""
  elif type == "string" then
    if test("[\\\\\\n\\x00]") then gsub("\\x00"; "") | gsub("\\\\"; "\\\\") | gsub("\\n"; "\\n") else . end
  elif type == "number" or type == "boolean" then tostring
  else tojson | field end;
def frame: (map(utf8bytelength + 1) | add - 1 | tostring), .[];
select(test("\\S"))
| . as $line
| [try fromjson catch empty] as $parsed  # (a try around the rest would catch its errors in jq 1.6)
| if $parsed == [] then ([$line[0:200] | field] | frame), ([""] | frame)
  else
    ($parsed[0] | if type == "object" then . else {} end) as $m
    | ($m.action | if type == "string" and test("^[A-Za-z]+$") then . else "?" end) as $action
    | ([$line | if index("\u0000") then gsub("\\x00"; "") else . end] | frame),
      ( [ $action,
          ( if $action == "initialize" then
              ($m.shardId, $m.sequenceNumber, $m.subSequenceNumber | field),
              ($m.channel | if type == "array" then map(select(type == "string")) | join(",") else "" end
               | field),
              ($m.streamName, $m.streamIdentifier | if type == "string" then . else null end | field)
            elif $action == "processRecords" then
              ($m.records | if type == "array" then . else [] end) as $records
              | ($m.millisBehindLatest | field),
                ($records | length | tostring),
                ( $records[]
                  | (if type == "object" then . else {} end)
                  | (.sequenceNumber, .subSequenceNumber, .partitionKey, .approximateArrivalTimestamp, .data
                     | field) )
            elif $action == "checkpoint" then ($m.sequenceNumber, $m.subSequenceNumber, $m.error | field)
            else empty end ) ]
        | frame )
  end
'

# ---- Logging -------------------------------------------------------------------------------------------

# kcl_log MESSAGE...: one line on stderr, prefixed with the shard id. The daemon logs the child's stderr.
kcl_log() {
  printf 'kcl[%s]: %s\n' "${KCL_SHARD_ID:-?}" "$*" >&2
}

# ---- kcl-daemon's log/metric channel ------------------------------------------------------------------
# Offered by kcl-daemon in initialize (the Java daemon does not): without it kcl_channel_log falls back to
# kcl_log and kcl_metric does nothing. The daemon rate-limits the channel and bounds the metric series.
_KCL_CHANNEL=,,

# _kcl_json_string VAR TEXT: VAR = TEXT as a JSON string literal (quotes included).
_kcl_json_string() {
  local text=$2
  text=${text//\\/\\\\}
  text=${text//\"/\\\"}
  text=${text//$'\n'/\\n}
  text=${text//$'\r'/\\r}
  text=${text//$'\t'/\\t}
  text=${text//[$'\001'-$'\037']/}
  printf -v "$1" '"%s"' "$text"
}

# kcl_channel_log LEVEL MESSAGE...: the daemon logs MESSAGE under this shard at LEVEL (debug, info,
# warning, error, critical).
kcl_channel_log() {
  local level=$1 message
  shift
  if [[ $_KCL_CHANNEL != *,log,* ]]; then
    kcl_log "$level $*"
    return 0
  fi
  _kcl_json_string level "$level"
  _kcl_json_string message "$*"
  _kcl_send "{\"action\":\"log\",\"level\":$level,\"message\":$message}"
}

# kcl_dead_letter REASON...: hand the current record (KCL_SEQUENCE_NUMBER / KCL_SUB_SEQUENCE_NUMBER)
# to the daemon's dead-letter destination and go on. Returns 1 when the daemon did not offer it
# (poisonRecordPolicy is not DEAD_LETTER, or the Java daemon).
kcl_dead_letter() {
  local seq reason
  [[ $_KCL_CHANNEL == *,deadLetter,* ]] || return 1
  _kcl_json_string seq "$KCL_SEQUENCE_NUMBER"
  _kcl_json_string reason "$*"
  _kcl_send "{\"action\":\"deadLetter\",\"sequenceNumber\":$seq,\"subSequenceNumber\":${KCL_SUB_SEQUENCE_NUMBER:-0},\"reason\":$reason}"
}

# kcl_metric NAME VALUE [UNIT [DIMENSION=VALUE...]]: one value of a metric the daemon exports with its
# own. UNIT is a CloudWatch unit (Count, Milliseconds, Bytes, ...; "" for none). Returns 1 for a VALUE
# that is not a number.
kcl_metric() {
  local name=$1 value=$2 unit=${3:-} dims='' pair key val
  [[ $_KCL_CHANNEL == *,metric,* ]] || return 0
  if ! [[ $value =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then
    kcl_log "kcl_metric $name: $value is not a number"
    return 1
  fi
  _kcl_json_string name "$name"
  if [[ -n $unit ]]; then _kcl_json_string unit "$unit"; else unit=null; fi
  for pair in "${@:4}"; do
    _kcl_json_string key "${pair%%=*}"
    _kcl_json_string val "${pair#*=}"
    dims+="${dims:+,}$key:$val"
  done
  _kcl_send "{\"action\":\"metric\",\"name\":$name,\"value\":$value,\"unit\":$unit,\"dimensions\":{$dims}}"
}

# ---- Main loop -----------------------------------------------------------------------------------------

# kcl_run: serve the daemon until stdin closes, then return 0. Call it once, as the script's last command.
kcl_run() {
  if ! declare -F kcl_process_records >/dev/null; then
    kcl_log "define a kcl_process_records function before calling kcl_run"
    return 2
  fi
  if ! command -v jq >/dev/null 2>&1; then
    kcl_log "jq is required but was not found on PATH"
    return 2
  fi
  if [[ -n $_KCL_OUT ]]; then
    kcl_log "kcl_run is already running"
    return 2
  fi
  # The jq reader takes over stdin. It runs in the background of the process substitution, so it is not
  # a child of this shell and a handler's plain `wait` does not wait for it. (A background command gets
  # /dev/null as stdin unless it says otherwise, hence the explicit copy of stdin.)
  local stdin_copy
  exec {stdin_copy}<&0
  exec {_KCL_IN}< <(jq -rR --unbuffered "$_KCL_JQ_READER" <&"$stdin_copy" &)
  # Keep the protocol output on a private descriptor; from here on stdout is stderr and stdin is empty,
  # so output and input of handlers never touch the protocol.
  exec {stdin_copy}<&- {_KCL_OUT}>&1 1>&2 0</dev/null

  while _kcl_next_message _KCL_MSG _KCL_RAW; do
    _kcl_handle_message
    ((_KCL_EOF == 0)) || break
  done
  exec {_KCL_IN}<&-
  return 0
}

# _kcl_next_message ARRAY RAW: the next message from the jq reader, its fields into ARRAY and its raw line
# into RAW; status 1 at end of input.
_kcl_next_message() {
  local _kcl_fields
  if ! _kcl_read_frame "$2" || ! _kcl_read_frame _kcl_fields; then
    _KCL_EOF=1
    return 1
  fi
  mapfile -t "$1" <<<"$_kcl_fields"
}

# _kcl_read_frame VAR: one "<N>\n<N bytes>\n" frame from the jq reader into VAR; status 1 at end of input.
_kcl_read_frame() {
  local _kcl_size
  ((_KCL_EOF == 0)) || return 1
  IFS= read -r -u "$_KCL_IN" _kcl_size || return 1
  if ! [[ $_kcl_size =~ ^[0-9]+$ ]] || ! LC_ALL=C IFS= read -r -N "$_kcl_size" -u "$_KCL_IN" "$1"; then
    kcl_log "the jq reader stopped or wrote something unexpected; giving up"
    return 1
  fi
  IFS= read -r -u "$_KCL_IN" _ || true # the newline after the frame
}

# _kcl_unescape VAR: undo the escaping of the jq reader (only fields with a backslash were escaped).
_kcl_unescape() {
  if [[ ${!1} == *\\* ]]; then
    printf -v "$1" '%b' "${!1}"
  fi
}

# _kcl_send JSON: one protocol message, wrapped in newlines so stray output cannot glue onto it.
_kcl_send() {
  printf '\n%s\n' "$1" >&"$_KCL_OUT"
}

# shellcheck disable=SC2034  # the KCL_ variables are for the user's handlers
_kcl_handle_message() {
  local action=${_KCL_MSG[0]}
  KCL_ACTION=$action
  KCL_RECORD_COUNT=0 KCL_RECORD_INDEX='' KCL_SEQUENCE_NUMBER='' KCL_SUB_SEQUENCE_NUMBER=''
  KCL_PARTITION_KEY='' KCL_ARRIVAL_MILLIS='' KCL_DATA_BASE64='' KCL_MILLIS_BEHIND_LATEST=''
  _KCL_NEXT=0
  case $action in
    initialize)
      KCL_SHARD_ID=${_KCL_MSG[1]}
      KCL_INITIAL_SEQUENCE_NUMBER=${_KCL_MSG[2]}
      KCL_INITIAL_SUB_SEQUENCE_NUMBER=${_KCL_MSG[3]}
      _KCL_CHANNEL=",${_KCL_MSG[4]:-},"
      KCL_STREAM_NAME=${_KCL_MSG[5]:-}
      KCL_STREAM_IDENTIFIER=${_KCL_MSG[6]:-}
      _kcl_unescape KCL_SHARD_ID
      _kcl_unescape KCL_INITIAL_SEQUENCE_NUMBER
      _kcl_call kcl_initialize
      ;;
    processRecords)
      KCL_MILLIS_BEHIND_LATEST=${_KCL_MSG[1]}
      KCL_RECORD_COUNT=${_KCL_MSG[2]}
      _kcl_call kcl_process_records
      ;;
    leaseLost) _kcl_call kcl_lease_lost ;;
    shardEnded) _kcl_call kcl_shard_ended _kcl_default_shard_ended ;;
    shutdownRequested) _kcl_call kcl_shutdown_requested ;;
    checkpoint)
      kcl_log "ignoring a checkpoint reply that nothing asked for"
      return 0
      ;;
    "")
      kcl_log "ignoring a line that is not JSON: ${_KCL_RAW:0:200}"
      return 0
      ;;
    *)
      kcl_log "ignoring a message without a known action: ${_KCL_RAW:0:200}"
      return 0
      ;;
  esac
  # Input closed while the handler waited for a checkpoint reply: nobody is left to read a status.
  ((_KCL_EOF == 0)) || return 0
  _kcl_send "{\"action\":\"status\",\"responseFor\":\"$action\"}"
}

# _kcl_call HANDLER [DEFAULT]: run HANDLER (or DEFAULT when HANDLER is not defined) in this shell.
_kcl_call() {
  local handler=$1 rc=0
  if ! declare -F "$handler" >/dev/null; then
    handler=${2-}
    [[ -n $handler ]] || return 0
  fi
  _KCL_IN_ACTION=1
  "$handler" || rc=$?
  _KCL_IN_ACTION=0
  if ((rc != 0)); then
    kcl_log "$handler failed with exit status $rc during $KCL_ACTION; sending the status anyway"
  fi
  return 0
}

# Without a kcl_shard_ended handler, finish the shard: the KCL requires a checkpoint at shard end.
# shellcheck disable=SC2119  # no arguments: checkpoint everything delivered
_kcl_default_shard_ended() {
  local attempt
  for attempt in 1 2 3; do
    kcl_checkpoint && return 0
    [[ $KCL_CHECKPOINT_ERROR == ThrottlingException ]] || break
    ((attempt == 3)) || sleep 1
  done
  kcl_log "checkpoint at shard end failed: $KCL_CHECKPOINT_ERROR"
  return 1
}

# ---- Records -------------------------------------------------------------------------------------------

# kcl_next_record: load the next record of the batch into KCL_SEQUENCE_NUMBER, KCL_SUB_SEQUENCE_NUMBER,
# KCL_PARTITION_KEY, KCL_ARRIVAL_MILLIS, KCL_DATA_BASE64 and KCL_RECORD_INDEX. Status 1 after the last.
#   while kcl_next_record; do ...; done
# shellcheck disable=SC2034  # the KCL_ variables are for the user's handlers
kcl_next_record() {
  ((_KCL_NEXT < KCL_RECORD_COUNT)) || return 1
  local base=$((3 + 5 * _KCL_NEXT))
  KCL_RECORD_INDEX=$_KCL_NEXT
  KCL_SEQUENCE_NUMBER=${_KCL_MSG[base]}
  KCL_SUB_SEQUENCE_NUMBER=${_KCL_MSG[base + 1]}
  KCL_PARTITION_KEY=${_KCL_MSG[base + 2]}
  KCL_ARRIVAL_MILLIS=${_KCL_MSG[base + 3]}
  KCL_DATA_BASE64=${_KCL_MSG[base + 4]}
  _kcl_unescape KCL_SEQUENCE_NUMBER
  _kcl_unescape KCL_PARTITION_KEY
  _KCL_NEXT=$((_KCL_NEXT + 1))
}

# kcl_each_record COMMAND [ARGS...]: run COMMAND once per record of the batch, from the first, with the
# record loaded as by kcl_next_record. Stops at the first COMMAND that fails and returns its status.
kcl_each_record() {
  _KCL_NEXT=0
  while kcl_next_record; do
    "$@" || return
  done
  return 0
}

# kcl_record_data: the current record's payload, decoded, on stdout (binary safe: pipe or redirect it).
kcl_record_data() {
  base64 -d <<<"$KCL_DATA_BASE64"
}

# kcl_record_text [VAR]: the payload as text into VAR (or onto stdout). NUL bytes are dropped and bytes
# that are not valid UTF-8 are kept as they are. Costs two small processes per call: for a quick test
# of a known value, compare KCL_DATA_BASE64 with its encoding instead.
kcl_record_text() {
  local _kcl_text
  _kcl_text=$(base64 -d <<<"$KCL_DATA_BASE64" 2>/dev/null | tr -d '\000'; printf x)
  _kcl_set_or_print "${1-}" "${_kcl_text%x}"
}

# kcl_record_size [VAR]: the decoded payload size in bytes into VAR (or onto stdout), without decoding.
kcl_record_size() {
  local b64=$KCL_DATA_BASE64 pad=0
  case ${b64: -2} in
    ==) pad=2 ;;
    ?=) pad=1 ;;
  esac
  _kcl_set_or_print "${1-}" "$((${#b64} * 3 / 4 - pad))"
}

# kcl_message_json: the raw JSON line of the message being handled, on stdout.
kcl_message_json() {
  printf '%s\n' "$_KCL_RAW"
}

# kcl_records_json: the batch's records as a JSON array on stdout, for bulk work with jq, e.g.
#   kcl_records_json | jq -r '.[] | .data | @base64d' >> out.txt
kcl_records_json() {
  jq -c '.records // []' <<<"$_KCL_RAW"
}

_kcl_set_or_print() {
  if [[ -z $1 ]]; then
    printf '%s\n' "$2"
  elif [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    printf -v "$1" '%s' "$2"
  else
    kcl_log "not a variable name: $1"
    return 2
  fi
}

# ---- Checkpointing -------------------------------------------------------------------------------------

# kcl_checkpoint [SEQUENCE_NUMBER [SUB_SEQUENCE_NUMBER]]: ask the daemon to checkpoint and wait for its
# answer. With no (or an empty) sequence number: "everything delivered so far" (at shard end: SHARD_END).
# Status 0 on success. Otherwise status 1 with the Java exception's simple name in KCL_CHECKPOINT_ERROR:
# ThrottlingException (retry later), ShutdownException (the lease is gone), InvalidStateException (no
# checkpointer for this action, or the reply was not a checkpoint message), IllegalArgumentException
# (position out of range; also set locally for a sub-sequence number that is not an integer), or
# another name. After end of input it is "EndOfInput".
# shellcheck disable=SC2120  # the arguments are optional
kcl_checkpoint() {
  local seq=${1-} sub=${2-} seq_json sub_json
  KCL_CHECKPOINT_ERROR=
  if ((_KCL_EOF)); then
    KCL_CHECKPOINT_ERROR=EndOfInput
    return 1
  fi
  if [[ -z $_KCL_OUT || $_KCL_IN_ACTION != 1 ]]; then
    kcl_log "kcl_checkpoint can only be called from a handler while kcl_run runs"
    KCL_CHECKPOINT_ERROR=InvalidStateException
    return 1
  fi
  if [[ -z $seq ]]; then
    seq_json=null
  elif [[ $seq =~ ^[A-Za-z0-9_]+$ ]]; then
    seq_json="\"$seq\""
  else
    seq_json=$(jq -cn --arg s "$seq" '$s')
  fi
  if [[ -z $sub ]]; then
    sub_json=null
  elif [[ $sub =~ ^(-?)0*([0-9]+)$ ]]; then
    sub_json=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
  else
    kcl_log "kcl_checkpoint: sub-sequence number is not an integer: $sub"
    KCL_CHECKPOINT_ERROR=IllegalArgumentException
    return 1
  fi
  _kcl_send "{\"action\":\"checkpoint\",\"sequenceNumber\":$seq_json,\"subSequenceNumber\":$sub_json}"

  # The reply is the very next line of input.
  if ! _kcl_next_message _KCL_REPLY _KCL_REPLY_RAW; then
    kcl_log "input closed while waiting for a checkpoint reply"
    KCL_CHECKPOINT_ERROR=EndOfInput
    return 1
  fi
  if [[ ${_KCL_REPLY[0]} != checkpoint ]]; then
    kcl_log "expected a checkpoint reply, got (and dropped): ${_KCL_REPLY_RAW:0:200}"
    KCL_CHECKPOINT_ERROR=InvalidStateException
    return 1
  fi
  KCL_CHECKPOINT_ERROR=${_KCL_REPLY[3]}
  [[ -z $KCL_CHECKPOINT_ERROR ]]
}
