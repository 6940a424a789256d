# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mpt_global_optspecs
    string join \n log= socket= remote= remote-conn= key= udp h/help V/version
end

function __fish_mpt_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_mpt_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_mpt_using_subcommand
    set -l cmd (__fish_mpt_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c mpt -n "__fish_mpt_needs_command" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_needs_command" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_needs_command" -l remote -d 'Manage a remote mptd over its command port ([daemon] cmd_port) instead of the local socket (status, path, reload; give it before the command). Needs --remote-conn and --key' -r
complete -c mpt -n "__fish_mpt_needs_command" -l remote-conn -d 'With --remote: the connection, as the remote mptd names it, whose pre-shared key --key holds; the key manages that connection only' -r
complete -c mpt -n "__fish_mpt_needs_command" -l key -d 'With --remote: that connection\'s key file (as written by `mpt genkey`, mode 0600)' -r -F
complete -c mpt -n "__fish_mpt_needs_command" -l udp -d 'With --remote: UDP (one datagram each way) instead of TCP'
complete -c mpt -n "__fish_mpt_needs_command" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_needs_command" -s V -l version -d 'Print version'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "status" -d 'Show connections and paths: state, addresses, weights, RTT, loss, traffic'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "path" -d 'Change a path at run time: up, down, backup, weights, add, remove'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "reload" -d 'Make mptd re-read its config file and apply what can change at run time'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "emu" -d 'Real-time link emulator between two interfaces (netem replacement)'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "bench" -d 'Benchmark the tunnel on an emulated testbed (needs root, iperf3, mptd)'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "genkey" -d 'Write a new pre-shared key (32 random bytes, base64) for `key_file`'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "keypair" -d 'Write a new X25519 private key to FILE (mode 0600) and print its public key'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "pubkey" -d 'Print the public key (base64) of a private key file'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "client" -d 'Branches of a concentrator: add, list, remove (on the server)'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "config" -d 'Configuration files'
complete -c mpt -n "__fish_mpt_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand status" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand status" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand status" -l json -d 'Print the daemon\'s status document as JSON (for scripts)'
complete -c mpt -n "__fish_mpt_using_subcommand status" -l once -d 'One sample: byte totals instead of rates (no 0.5 s wait)'
complete -c mpt -n "__fish_mpt_using_subcommand status" -l full -d 'Every connection in full detail, however many there are'
complete -c mpt -n "__fish_mpt_using_subcommand status" -l brief -d 'One line per connection, however few there are'
complete -c mpt -n "__fish_mpt_using_subcommand status" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand path; and not __fish_seen_subcommand_from add remove help" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and not __fish_seen_subcommand_from add remove help" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand path; and not __fish_seen_subcommand_from add remove help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mpt -n "__fish_mpt_using_subcommand path; and not __fish_seen_subcommand_from add remove help" -a "add" -d 'Add a path to a running connection; the peer is told'
complete -c mpt -n "__fish_mpt_using_subcommand path; and not __fish_seen_subcommand_from add remove help" -a "remove" -d 'Remove a path from a running connection; the peer is told'
complete -c mpt -n "__fish_mpt_using_subcommand path; and not __fish_seen_subcommand_from add remove help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -l local -d 'Local address to send from' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -l remote -d 'Remote address (learnt from the peer if not given)' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -l interface -d 'Bind to this network device' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -l weight -d 'weight_out and weight_in of the new path [default: 1]' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from remove" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from remove" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from remove" -l force -d 'Remove it even if it is the connection\'s only usable path'
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add a path to a running connection; the peer is told'
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Remove a path from a running connection; the peer is told'
complete -c mpt -n "__fish_mpt_using_subcommand path; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand reload" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand reload" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand reload" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand completions" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand completions" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand completions" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -f -a "run" -d 'Emulate a link between interfaces A and B until Ctrl-C, SIGTERM or --duration'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -f -a "selftest" -d 'Measure the emulator\'s accuracy in throw-away namespaces (needs root)'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -f -a "profiles" -d 'List the link profile presets, or print one'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and not __fish_seen_subcommand_from run selftest profiles help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l a -d 'Interface of side a' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l b -d 'Interface of side b' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l netns -d 'Network namespace (ip netns) holding both interfaces' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l profile -d 'Link profile: a preset name or a TOML file' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l rate -d 'Rate on whole Ethernet frames, e.g. 10mbit, 1gbit, unlimited' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l delay -d 'Fixed one-way delay, e.g. 300ms' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l jitter -d 'Jitter: half-width (uniform) or standard deviation (normal), e.g. 5ms' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l jitter-dist -d 'Jitter distribution: uniform or normal' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l loss -d 'Bernoulli packet error rate, e.g. 0.01 or 1%' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l ge -d 'Gilbert-Elliott bursts p,r[,h[,k]]: p good->bad, r bad->good, h/k delivery probability in bad/good (default 0/1)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l queue -d 'Tail-drop limit of the transmit backlog, e.g. 100kB (default 1514000 B)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l outage -d 'Down windows from the start, START+LEN[,START+LEN...], e.g. 10s+2s,30s+500ms' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l periodic -d 'Periodic contacts UP/DOWN, e.g. 20s/10s (starts up)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l relay -d 'Store-and-forward custody: hold up to BYTES over outages instead of dropping' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l trace -d 'Rate/delay trace file (TIME RATE [DELAY] per line)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l trace-format -d 'How --trace is read: mpt (TIME RATE [DELAY]) or mahimahi (one delivery opportunity per line, ms)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l ab -d 'Override for a->b only, KEY=VALUE (repeatable), e.g. --ab rate=2mbit' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l ba -d 'Override for b->a only, KEY=VALUE (repeatable)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l seed -d 'Seed for loss and jitter (default: the profile\'s, else 1)' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l duration -d 'Stop after this long (seconds, or with a unit), e.g. 60 or 2m' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l report-json -d 'Also write the configuration and report as JSON to FILE' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l rt-priority -d 'SCHED_FIFO priority of the wire threads (1-99); 0 = normal scheduling' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l reorder -d 'Let jitter reorder packets (default: order preserved)'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -l keep-offloads -d 'Leave TSO/GSO/GRO of the interfaces as they are'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from selftest" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from selftest" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from selftest" -l json -d 'Print the results as JSON (for scripts) instead of a table'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from selftest" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from profiles" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from profiles" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from profiles" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from help" -f -a "run" -d 'Emulate a link between interfaces A and B until Ctrl-C, SIGTERM or --duration'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from help" -f -a "selftest" -d 'Measure the emulator\'s accuracy in throw-away namespaces (needs root)'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from help" -f -a "profiles" -d 'List the link profile presets, or print one'
complete -c mpt -n "__fish_mpt_using_subcommand emu; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l paths -d 'Path counts to sweep, e.g. 1,2,4,8,12 (each 1..32)' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l duration -d 'Seconds per measurement (1..3600)' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l combos -d 'Inner-in-outer IP versions: 4in4, 6in4, 4in6, 6in6 (comma-separated) or all' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l out -d 'Output directory (default ./bench-out/<scenario>-<timestamp>)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l mptd -d 'mptd binary (default: MPTD_BIN, next to mpt, then PATH)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l dtnd -d 'dtn-relay: the dtnd binary (dtn7-rs) [default: DTND_BIN, the bench\'s install root, ~/.cargo/bin, PATH; installed with cargo when missing]' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l scheduler -d 'mptd\'s scheduler in every case (default: the scenario\'s; `unlike` leaves mptd\'s default, the others ask for weighted)' -r -f -a "adaptive\t''
weighted\t''"
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l baseline -d 'Kernel MPTCP beside the tunnel in `unlike` (iperf3 under `mptcpize run`) and `handover` (its bulk stream over MPTCP sockets across the same WiFi outage), one subflow per path, bytes per path checked: auto = when mptcpize is installed; mptcp = always (installs mptcpize with apt-get if missing); none = off' -r -f -a "auto\t''
mptcp\t''
none\t''"
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l accel -d 'TCP acceleration beside the tunnel in `unlike` and `satellite` (end hosts behind the gateways, every TCP flow between them split at the sending gateway and carried over warm legs, docs/ACCELERATION.md): auto = on, except with --quick; on; off. Needs nft (nftables)' -r -f -a "auto\t''
on\t''
off\t''"
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l accel-legs -d 'The accelerated variant\'s legs (`[tunnel] accel_legs` at both gateways): pinned = one leg per path inside the tunnel; direct = one TCP connection per path beside it, over the path itself' -r -f -a "pinned\t''
direct\t''"
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l clients -d 'clients: client mptds on one server [default: 200; --quick: 8]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l paths-per-client -d 'clients: paths of each client [default: 2]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l senders -d 'clients: clients sending TCP at once [default: 4; --quick: 2]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l rekey-after -d 'clients: the last client renews its keys this often; it is measured alone against client 0 without rekeys, both paced at half the single client\'s rate (TCP retransmits); 0 = off [default: 2]. soak: every client renews its keys this often [default: 5]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l nofile -d 'clients, soak: start the server mptd under this RLIMIT_NOFILE (soft and hard, as `ulimit -n N`), e.g. 256 for 150 two-path clients' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l recover-within -d 'soak: every client must be up and answer within this many seconds of each fault\'s end [default: 15]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l quick -d 'Short run for CI: the scenario\'s [quick] settings (ethernet: 2 paths, 3 s)'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l port-per-client -d 'clients: give every client connection on the server its own port and configured paths, as before the shared port [default: all clients on the server\'s one port 65022, their paths learnt]'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -l flood -d 'clients: a flood of forged handshake initiations from spoofed addresses, alone (server memory), then 3 rounds of the senders quiet / flooded / flooded at a closed port (the flooder\'s own CPU cost) / paced at half rate, quiet and flooded'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -a "compare" -d 'Compare two results.json side by side: change and whether it is beyond the runs\' spread'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -a "replot" -d 'Redraw the charts and index.html of a results folder from its results.json and work/'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and not __fish_seen_subcommand_from compare replot help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from compare" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from compare" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from compare" -l json -d 'Machine output: the comparison as JSON'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from compare" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from replot" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from replot" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from replot" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "compare" -d 'Compare two results.json side by side: change and whether it is beyond the runs\' spread'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "replot" -d 'Redraw the charts and index.html of a results folder from its results.json and work/'
complete -c mpt -n "__fish_mpt_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand genkey" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand genkey" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand genkey" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand keypair" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand keypair" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand keypair" -l force -d 'Replace FILE if it exists (the old key is lost)'
complete -c mpt -n "__fish_mpt_using_subcommand keypair" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand pubkey" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand pubkey" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand pubkey" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -f -a "add" -d 'Add a branch: its key pair, a free tunnel address, the server\'s client file; print the branch\'s config'
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -f -a "list" -d 'List the server\'s clients (and whether each is connected, if mptd answers)'
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -f -a "remove" -d 'Delete a client\'s file; `mpt reload` then cuts the client off'
complete -c mpt -n "__fish_mpt_using_subcommand client; and not __fish_seen_subcommand_from add list remove help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l config -d 'The server\'s config file (its [daemon] include names the client folder)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l endpoint -d 'The concentrator\'s address as the branch reaches it, and its port if not the shared port (e.g. a NAT\'s forwarded port)' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l key-out -d 'Write the branch\'s new private key here (mode 0600)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l uplink -d 'A branch interface to reach the concentrator by: one path each, following that interface\'s address (at least one)' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l network -d 'A network behind the branch, routed to it by the server (repeat)' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l route -d 'What the branch routes into the tunnel (repeat) [default: the server\'s tunnel prefixes]' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l ipv4 -d 'The branch\'s tunnel IPv4 address instead of the next free one' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l ipv6 -d 'The branch\'s tunnel IPv6 address instead of the next free one' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l key-path -d 'Where the branch will keep its private key (the printed config\'s private_key_file) [default: /etc/mpt/NAME.key]' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -l force -d 'Replace --key-out if it exists (never a client file)'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from list" -l config -d 'The server\'s config file' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from list" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from list" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from remove" -l config -d 'The server\'s config file' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from remove" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from remove" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add a branch: its key pair, a free tunnel address, the server\'s client file; print the branch\'s config'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the server\'s clients (and whether each is connected, if mptd answers)'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Delete a client\'s file; `mpt reload` then cuts the client off'
complete -c mpt -n "__fish_mpt_using_subcommand client; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand config; and not __fish_seen_subcommand_from check help" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand config; and not __fish_seen_subcommand_from check help" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand config; and not __fish_seen_subcommand_from check help" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand config; and not __fish_seen_subcommand_from check help" -f -a "check" -d 'Validate an mptd config file without starting anything (exit 0 valid, 2 invalid)'
complete -c mpt -n "__fish_mpt_using_subcommand config; and not __fish_seen_subcommand_from check help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand config; and __fish_seen_subcommand_from check" -l log -d 'Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug [default: info; warn for bench, whose progress goes to stdout]' -r
complete -c mpt -n "__fish_mpt_using_subcommand config; and __fish_seen_subcommand_from check" -l socket -d 'mptd\'s control socket (status, path, reload)' -r -F
complete -c mpt -n "__fish_mpt_using_subcommand config; and __fish_seen_subcommand_from check" -l resolve -d 'Also look up every path\'s `remote` host name through the system resolver, as the daemon would at start; a name without an address of its path\'s family is an error (exit 2). Without it, names are not looked up (the daemon starts anyway and retries them)'
complete -c mpt -n "__fish_mpt_using_subcommand config; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c mpt -n "__fish_mpt_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "check" -d 'Validate an mptd config file without starting anything (exit 0 valid, 2 invalid)'
complete -c mpt -n "__fish_mpt_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "status" -d 'Show connections and paths: state, addresses, weights, RTT, loss, traffic'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "path" -d 'Change a path at run time: up, down, backup, weights, add, remove'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "reload" -d 'Make mptd re-read its config file and apply what can change at run time'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "completions" -d 'Print a shell completion script'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "emu" -d 'Real-time link emulator between two interfaces (netem replacement)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "bench" -d 'Benchmark the tunnel on an emulated testbed (needs root, iperf3, mptd)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "genkey" -d 'Write a new pre-shared key (32 random bytes, base64) for `key_file`'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "keypair" -d 'Write a new X25519 private key to FILE (mode 0600) and print its public key'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "pubkey" -d 'Print the public key (base64) of a private key file'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "client" -d 'Branches of a concentrator: add, list, remove (on the server)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "config" -d 'Configuration files'
complete -c mpt -n "__fish_mpt_using_subcommand help; and not __fish_seen_subcommand_from status path reload completions emu bench genkey keypair pubkey client config help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from path" -f -a "add" -d 'Add a path to a running connection; the peer is told'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from path" -f -a "remove" -d 'Remove a path from a running connection; the peer is told'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from emu" -f -a "run" -d 'Emulate a link between interfaces A and B until Ctrl-C, SIGTERM or --duration'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from emu" -f -a "selftest" -d 'Measure the emulator\'s accuracy in throw-away namespaces (needs root)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from emu" -f -a "profiles" -d 'List the link profile presets, or print one'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "compare" -d 'Compare two results.json side by side: change and whether it is beyond the runs\' spread'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "replot" -d 'Redraw the charts and index.html of a results folder from its results.json and work/'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from client" -f -a "add" -d 'Add a branch: its key pair, a free tunnel address, the server\'s client file; print the branch\'s config'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from client" -f -a "list" -d 'List the server\'s clients (and whether each is connected, if mptd answers)'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from client" -f -a "remove" -d 'Delete a client\'s file; `mpt reload` then cuts the client off'
complete -c mpt -n "__fish_mpt_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "check" -d 'Validate an mptd config file without starting anything (exit 0 valid, 2 invalid)'
