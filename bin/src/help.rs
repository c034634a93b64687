//! `--help` texts. docs/cli.md says the same; a test keeps them in step.

use crate::args::Command;

pub const MAIN: &str = "\
proxops — converge Proxmox VE clusters to a git repository of YAML manifests

Usage: proxops [GLOBAL FLAGS] <COMMAND> [FLAGS]

Commands:
  validate        Parse and validate the repository; print `ok: N clusters, M objects`
  diff            Plan every cluster and print the plan (reads PVE, or a recording with --replay)
  apply           Show the plan, ask, then run one converge cycle per cluster
  status          Per-cluster convergence table
  run             Daemon: converge every poll interval; serve /healthz, /metrics, /status
  adopt           Write manifests for the live guests and files of one cluster (read-only)
  record          Save one cluster's PVE responses to <cluster>.json for offline diff
  secrets check   Decrypt and verify a SOPS file; print a fingerprint per value
  schema          Print the JSON Schema of one manifest kind, or of every kind
  explain         Explain a manifest field, e.g. `proxops explain vm.spec.memory`

Global flags:
  --git-path <DIR>        The GitOps work tree (default: $PROXOPS_GIT_PATH, else the
                          nearest directory at or above the working directory holding .git)
  --config <FILE>         A single configuration file (default: $PROXOPS_CONFIG): a URL-mode
                          file, or clusters/<name>/config.yaml to run that cluster alone
  --cluster <NAME>        Only this cluster; repeat for several
  --log-level <LEVEL>     debug | info | warn | error
  --log-format <FORMAT>   text | json (one object a line, with an RFC 3339 ts)
  --listen <ADDR>         HTTP bind address for `run` (default 127.0.0.1:9494)
  --git-url <URL>         URL mode: fetch desired state from this remote
  --git-branch <BRANCH>   Branch to reconcile in URL mode (default main)
  --git-poll-sec <N>      Poll interval in seconds for `run`
  --prune-budget <N>      Deletions per cluster per cycle; 0 = unlimited, -1 = configured
  --pve-user <USER>       Bootstrap PVE user as user@realm (e.g. root@pam)
  --pve-auth <METHOD>     token | ticket
  --ca-file <FILE>        PEM CA bundle trusted for PVE endpoints
  --color <WHEN>          Colour the text plan: auto (default: on a terminal, unless
                          NO_COLOR is set), always or never
  -h, --help              Print help (also `proxops <command> --help`)
  -V, --version           Print the version

Each command takes only its own flags (see `proxops <command> --help`) and the
global flags; any other flag is an error (exit 2). An unknown command, flag
or value is answered with the nearest valid one (`did you mean \"validate\"?`;
`plan` is `diff` here). Without a command, this text goes to stderr and the
exit code is 2.

Exit codes: 0 success; 1 failure at run time (PVE, git, a failed action, an
aborted cycle); 2 invalid input (usage, configuration, credentials, manifests:
nothing read from PVE, nothing written); 3 `diff --exit-code` found changes.
Credentials are never accepted as flags: use PROXOPS_PVE_TOKEN_VALUE and friends,
or a SOPS file (docs/credentials.md).
";

pub fn command(c: Command) -> &'static str {
    match c {
        Command::Validate => {
            "\
Usage: proxops [GLOBAL FLAGS] validate [-o|--output text|json]

Parse and validate configuration, composition and every manifest of every
cluster. Prints `ok: N clusters, M objects`, or one diagnostic per line naming
file, line, column and field. Reads no PVE. Exit 0 when valid, 2 otherwise.
Every problem of a file is reported in one run, not only the first. An
unknown kind or field is answered with the nearest valid one, as a full path
(`did you mean spec.cpu.cores?`).
A manifest file under a kind directory that no resources.yaml lists is a
`warning:` line on stderr; warnings never change the exit code. So is a
decimal or bare size that is not whole in the unit PVE takes it in (GiB for
disks, MiB for memory): `size: 32G` is 29.80 GiB, while PVE's own 32G means
32GiB; the warning names the binary spelling to write.
  -o, --output FORMAT
                    text (default) or json: {\"diagnostics\": [{file, line,
                    column, path, message, hint, severity}], \"errors\": N,
                    \"warnings\": N} on stdout (docs/cli.md)
A file over its size cap (1 MiB for a manifest or resources.yaml, 256 KiB for
a configuration file) or nested deeper than 32 levels is refused before it is
parsed. spec.extra keys are checked per cluster against the cluster's
allow-extra-keys (docs/configuration.md). Values are checked as PVE stores
them: an upper-case tag is refused with its lower-case spelling unless the
cluster declares tag-style: case-sensitive, and a storage file name PVE would
rewrite is refused with the name PVE would store.
"
        }
        Command::Diff => {
            "\
Usage: proxops [GLOBAL FLAGS] diff [--replay DIR] [-o|--output text|json|markdown] [--diff] [--exit-code] [--out FILE]

Plan every selected cluster and print the plan. Writes nothing to PVE.
The text plan lists under each action the fields it changes (`~ memory
(spec.memory)  2048 → 4096`, `+` added, `-` removed, secrets as <secret>),
marks the change that forces a restart (`← stop-start`), and ends each
cluster with a summary line and the plan with a `Plan:` total. Markdown stays
under 60,000 characters; a longer plan is cut, with a note, totals intact.
Unlisted manifest files are `warning:` lines on stderr (and `warnings` in json).
A larger disk size is a `resize` action (grown online); a smaller one is a
`shrink` anomaly, never done.
  --replay DIR      Read PVE from recordings DIR/<cluster>.json instead of the API
  -o, --output FORMAT
                    text (default), json (stable schema, docs/plan-json.md) or
                    markdown (for pull-request comments)
  --diff            Accepted and ignored: every output shows field changes
  --exit-code       Exit 3 when any cluster has an action to take or a guest
                    waiting for a restart to take changes PVE holds pending
  --out FILE        Also save the plan for `apply --plan FILE`: the actions, the
                    commit and what PVE showed of every object they touch; no
                    secret is written (docs/saved-plans.md)
"
        }
        Command::Apply => {
            "\
Usage: proxops [GLOBAL FLAGS] apply [-y|--yes] [-n|--dry-run] [--diff] [-o|--output text|json] [--plan FILE]

Run one converge cycle per selected cluster: read live and plan every cluster,
print the plan (what diff prints), ask, then execute, read back and print the
results. On a terminal, type `yes` to go on; any other answer cancels (exit 1,
nothing written). With no terminal on standard input and no --yes, apply
refuses at once (exit 2, nothing read or written).
Progress goes to stderr: a line when each action starts (its worker=N and how
many run at once), one when it ends (its time and PVE task UPIDs), and
`still running (Ns)` every 10 s of a task. Actions run at once within the
cluster's tasks-per-node (4), tasks-per-cluster (8) and downloads-per-storage
(2), dependencies first; at most disruption-budget (1) guests are down at once,
and per proxops/disruption-group its budget (disruption-groups).
A guest that must be off for an action is shut down (status/shutdown, waiting
reconcile.shutdown-timeout, default 180s); one that does not shut down in time
is left running, untouched, and the action fails, unless the cluster sets
force-stop-after-timeout: true (then status/stop, and the action goes on).
  -y, --yes         Apply without asking (scripts, CI)
  -n, --dry-run     Plan only; write nothing (same output and exit code as
                    diff); no question
  --diff            Accepted and ignored: the plan always shows field changes
  -o, --output FORMAT
                    text (default) or json (plan and results in one document at
                    the end; when asking, the text plan is shown on stderr)
  --plan FILE       Execute exactly the actions saved by `diff --out FILE`, no
                    re-plan; refused (exit 1, nothing written) when the commit,
                    the files or any touched object changed since. Shown and
                    asked like a plan. With --dry-run: only check
                    (docs/saved-plans.md)
Each cluster is locked from its read to its read-back (<data-dir>/locks/);
one held by another proxops process is waited for up to reconcile.lock-wait
(default 5s), then aborted as `locked`, naming the holder.
Exit 1 when any action failed or any cluster aborted.
"
        }
        Command::Status => {
            "\
Usage: proxops [GLOBAL FLAGS] status [-o|--output text|json]

Run a read-only cycle and print each cluster's convergence table, with the
guest proxops itself runs in (`self:` lines; matched by this host's MACs or
SMBIOS UUID, or the configuration's `self:`).
  -o, --output FORMAT
                    text (default) or json (the /status document, as an
                    observing daemon serves it after one cycle)
"
        }
        Command::Run => {
            "\
Usage: proxops [GLOBAL FLAGS] run [-n|--dry-run]

Daemon: every reconcile.poll-interval (--git-poll-sec) re-read the repository
(a git fetch in URL mode) and run one cycle per cluster, up to
daemon.parallel-clusters (default 4) clusters at once, each on its own
schedule: a slow PVE delays only its own cluster; serve GET /healthz,
/metrics and /status on --listen (port 0 picks a free one; the start-up log
line names it). A cycle that fails (invalid tree, PVE unreachable) is
reported and the loop goes on; a cluster another proxops process holds
(its lock) is skipped that cycle as `locked`. --log-level debug logs every
PVE request.
Unattended by design: it asks nobody before writing.
The guest proxops runs in is never stopped, restarted or pruned
(docs/operations.md, \"Highly available\").
SIGINT/SIGTERM: finish the actions in flight, start no new one, exit 0.
  -n, --dry-run     Observe only: read and plan every cycle, log the plan and
                    serve the pending changes; never write to PVE. The first
                    log line and /status say \"mode\": observe or apply
If the status server stops serving: the same, then exit 1.
"
        }
        Command::Adopt => {
            "\
Usage: proxops [GLOBAL FLAGS] adopt --cluster NAME [--replay DIR] [--adopt-secrets]

Read one cluster (only GET requests) and write a manifest per live guest,
template and storage file under <kind>/<cluster>/. Prints the resources.yaml
lines to add, the gap report, INCOMPLETE and SKIPPED lists. Never writes
through a symlink that leads out of the work tree (refused, nothing written).
  --replay DIR       Adopt from a recording instead of the API
  --adopt-secrets    Add live SSH keys the cluster's SOPS file lacks, as
                     adopted-<hex> names, and reference them (PVE unchanged);
                     takes the cluster's lock, as apply does
"
        }
        Command::Record => {
            "\
Usage: proxops [GLOBAL FLAGS] record --out DIR

Read every selected cluster as diff would and save the responses to
DIR/<cluster>.json (proxops-recording/v1). Never records a credential, and
never writes through a symlink that leads out of DIR.
"
        }
        Command::SecretsCheck => {
            "\
Usage: proxops secrets check FILE

Decrypt FILE with the age identities ProxOps would use (SOPS_AGE_KEY,
SOPS_AGE_KEY_FILE, the sops default key file) and verify its MAC. Prints one
line per value: <path>\\tsha256:<first 12 hex digits>. Never prints a value.
Exit 0 when it decrypts and the MAC holds; 2 otherwise, naming the error class.
"
        }
        Command::Schema => {
            "\
Usage: proxops schema [KIND]

Print the JSON Schema (draft 2020-12) of one manifest kind (VM, TemplateVM,
LXC, TemplateCT, ISO, CTTemplate, DiskImage; any case), or without KIND one
schema covering every kind, chosen by `kind`. Generated from the types the
loader reads: each field carries its description, `x-pve-key`, `x-default`,
`x-impact` and the values and patterns the loader accepts. The same schemas
are in docs/schema/*.json, for editors (docs/getting-started.md). Rules that
span files (references, vmid collisions, the cluster's nodes) are validate's.
Reads no repository and no PVE. Exit 2 for an unknown kind.
"
        }
        Command::Explain => {
            "\
Usage: proxops explain <kind>[.<field path>]

Print what a manifest field means: its description, type, allowed values,
default, the PVE key it writes and the impact of a change on a running guest
(live, reboot, stop-start, or an anomaly for a person), e.g.
`proxops explain vm.spec.memory`, `proxops explain lxc.spec.root.size`. List
items are walked through (`vm.spec.disks.size`). Read from the same schema
`proxops schema` prints. Reads no repository and no PVE. An unknown kind or
field exits 2, naming the nearest valid path.
"
        }
    }
}
