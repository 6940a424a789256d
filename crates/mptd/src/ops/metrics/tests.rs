use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use mpt_proto::reorder::HoldHistogram;

use super::*;
use crate::ops::testing::one_connection;

/// The families of the page as the Prometheus text format named them
/// (sample names), with their type.
const FAMILIES: [(&str, &str); 34] = [
    ("mpt_path_up", "gauge"),
    ("mpt_path_state", "gauge"),
    ("mpt_path_rtt_seconds", "gauge"),
    ("mpt_path_loss_ratio", "gauge"),
    ("mpt_path_rate_bits_per_second", "gauge"),
    ("mpt_path_rate_confirmed", "gauge"),
    ("mpt_path_relative_owd_seconds", "gauge"),
    ("mpt_path_queue_delay_seconds", "gauge"),
    ("mpt_path_lossy", "gauge"),
    ("mpt_path_share_ratio", "gauge"),
    ("mpt_path_weight_out", "gauge"),
    ("mpt_path_state_changes_total", "counter"),
    ("mpt_path_tx_packets_total", "counter"),
    ("mpt_path_rx_packets_total", "counter"),
    ("mpt_path_tx_bytes_total", "counter"),
    ("mpt_path_rx_bytes_total", "counter"),
    ("mpt_drops_total", "counter"),
    ("mpt_handshakes_total", "counter"),
    ("mpt_rekeys_total", "counter"),
    ("mpt_session_established", "gauge"),
    ("mpt_session_key_age_seconds", "gauge"),
    ("mpt_noise_handshake_total", "counter"),
    ("mpt_reorder_held_packets", "gauge"),
    ("mpt_reorder_longest_hold_seconds", "gauge"),
    ("mpt_repair_total", "counter"),
    ("mpt_redundancy_copies_total", "counter"),
    ("mpt_redundancy_bytes_total", "counter"),
    ("mpt_tcp_total", "counter"),
    ("mpt_equalize_hold_seconds", "gauge"),
    ("mpt_equalize_held_packets_total", "counter"),
    ("mpt_equalize_held_seconds_total", "counter"),
    ("mpt_handovers_total", "counter"),
    ("mpt_handover_gap_seconds", "gauge"),
    ("mpt_reorder_hold_seconds", "histogram"),
];

/// The value of the sample `series` (name and labels) on `page`.
fn value(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{page}"))
}

/// Encodes what `write` writes, as a scrape would.
fn page_of(
    write: impl Fn(&mut DescriptorEncoder) -> fmt::Result + Send + Sync + 'static,
) -> String {
    struct One<F>(F);
    impl<F> fmt::Debug for One<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("One")
        }
    }
    impl<F: Fn(&mut DescriptorEncoder) -> fmt::Result + Send + Sync + 'static> Collector for One<F> {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            (self.0)(&mut encoder)
        }
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(One(write)));
    encode(&registry)
}

#[test]
fn hold_histogram_is_cumulative_with_sum_and_count() {
    let mut h = HoldHistogram::default();
    for us in [300, 1_500, 1_500, 700_000, 3_000_000] {
        h.record(Duration::from_micros(us));
    }
    let out = page_of(move |e| reorder::hold_histogram(e, [(families::Labels::conn("c"), &h)]));
    let value = |series: &str| value(&out, series);
    assert!(out.contains("# TYPE mpt_reorder_hold_seconds histogram"));
    assert!(out.contains("# UNIT mpt_reorder_hold_seconds seconds"));
    // OpenMetrics puts `le` before the histogram's own labels.
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{le=\"0.001\",conn=\"c\"}"),
        1.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{le=\"0.002\",conn=\"c\"}"),
        3.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{le=\"0.512\",conn=\"c\"}"),
        3.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{le=\"1.024\",conn=\"c\"}"),
        4.0
    );
    assert_eq!(
        value("mpt_reorder_hold_seconds_bucket{le=\"+Inf\",conn=\"c\"}"),
        5.0
    );
    assert_eq!(value("mpt_reorder_hold_seconds_count{conn=\"c\"}"), 5.0);
    assert!((value("mpt_reorder_hold_seconds_sum{conn=\"c\"}") - 3.7033).abs() < 1e-9);
    // Twelve buckets: eleven limits and +Inf.
    assert_eq!(out.matches("_bucket{").count(), 12);
}

#[test]
fn the_page_has_every_family_typed_and_every_sample_labelled_by_connection() {
    let page = render(&one_connection("c"));
    assert!(page.ends_with("# EOF\n"), "{page}");
    for (name, kind) in FAMILIES {
        // OpenMetrics names a counter family without `_total`.
        let family = match kind {
            "counter" => name.strip_suffix("_total").unwrap(),
            _ => name,
        };
        assert!(
            page.contains(&format!("\n# TYPE {family} {kind}\n")),
            "no {kind} {family} in\n{page}"
        );
        assert!(page.contains(&format!("# HELP {family} ")), "{family}");
    }
    assert_eq!(page.matches("# TYPE ").count(), FAMILIES.len(), "{page}");
    let samples: Vec<&str> = page
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    // 20 path samples, 20 + 3 drops, 11 repairs, 3 + 1 redundancy, 1 tcp,
    // 3 equalize, 1 handover, 2 + 14 resequencer (no keys, no handover
    // yet).
    assert_eq!(samples.len(), 74, "{page}");
    for s in &samples {
        let (series, number) = s.rsplit_once(' ').unwrap();
        assert!(number.parse::<f64>().is_ok(), "{s}");
        let labels = series.split_once('{').map(|(_, l)| l).unwrap_or("");
        assert!(
            labels.starts_with("conn=\"") || labels.contains(",conn=\""),
            "sample without a conn label: {s}"
        );
        let name = series.split('{').next().unwrap();
        let family_of = |f: &str| {
            name == f
                || name
                    .strip_prefix(f)
                    .is_some_and(|rest| ["_bucket", "_sum", "_count"].contains(&rest))
        };
        assert!(
            FAMILIES.iter().any(|(f, _)| family_of(f)),
            "sample of no known family: {s}"
        );
    }
    // Sample names as before: counters end in `_total`.
    assert_eq!(
        value(&page, "mpt_drops_total{conn=\"c\",reason=\"malformed\"}"),
        103.0
    );
    assert_eq!(
        value(&page, "mpt_drops_total{conn=\"\",reason=\"no_route\"}"),
        137.0
    );
    assert_eq!(
        value(
            &page,
            "mpt_drops_total{conn=\"\",reason=\"tun_read_errors\"}"
        ),
        138.0
    );
    assert_eq!(
        value(&page, "mpt_repair_total{conn=\"c\",event=\"missed\"}"),
        128.0
    );
    assert_eq!(
        value(
            &page,
            "mpt_redundancy_copies_total{conn=\"c\",event=\"sent\"}"
        ),
        131.0
    );
    assert_eq!(
        value(&page, "mpt_redundancy_bytes_total{conn=\"c\"}"),
        132.0
    );
    assert_eq!(
        value(&page, "mpt_equalize_held_packets_total{conn=\"c\"}"),
        135.0
    );
    assert_eq!(
        value(&page, "mpt_equalize_held_seconds_total{conn=\"c\"}"),
        0.000136
    );
    assert_eq!(
        value(&page, "mpt_path_tx_bytes_total{conn=\"c\",path=\"p0\"}"),
        1234.0
    );
    assert_eq!(
        value(&page, "mpt_path_weight_out{conn=\"c\",path=\"p0\"}"),
        3.0
    );
    assert_eq!(
        value(
            &page,
            "mpt_path_state{conn=\"c\",path=\"p0\",state=\"probing\"}"
        ),
        1.0
    );
    assert_eq!(value(&page, "mpt_path_up{conn=\"c\",path=\"p0\"}"), 0.0);
    assert_eq!(value(&page, "mpt_reorder_held_packets{conn=\"c\"}"), 0.0);
    // Every drop reason of the status document, and no other.
    let status = serde_json::to_value(crate::ops::status::status(&one_connection("c"))).unwrap();
    let reasons = status["connections"][0]["drops"].as_object().unwrap();
    for reason in reasons.keys() {
        let series = format!("mpt_drops_total{{conn=\"c\",reason=\"{reason}\"}}");
        assert!(page.contains(&series), "{series}");
    }
    assert_eq!(
        page.matches("mpt_drops_total{conn=\"c\",").count(),
        reasons.len()
    );
}

#[test]
fn label_values_and_help_are_escaped() {
    let page = render(&one_connection("a\"b\\c\nd"));
    assert!(
        page.contains("mpt_path_up{conn=\"a\\\"b\\\\c\\nd\",path=\"p0\"} 0\n"),
        "{page}"
    );
    assert!(!page.contains("a\"b"), "{page}");
    // Help texts quote `conn=""`: escaped as OpenMetrics wants.
    assert!(
        page.contains("(conn=\\\"\\\": before any connection is known)"),
        "{page}"
    );
}

/// Starts the HTTP side on a free port with a fixed page; returns its
/// address, the shutdown flag and the thread.
fn server() -> (
    std::net::SocketAddr,
    Arc<AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Arc::new(AtomicBool::new(false));
    let stop = shutdown.clone();
    let thread = std::thread::spawn(move || {
        http::serve(listener, &stop, || "the page\n# EOF\n".to_string())
    });
    (addr, shutdown, thread)
}

/// Sends `request` and reads the whole answer.
fn ask(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn http_answers_get_metrics_only() {
    let (addr, shutdown, thread) = server();
    let ok = ask(
        addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
    );
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{ok}"
    );
    assert!(ok.contains("\r\nContent-Length: 15\r\n"), "{ok}");
    assert!(ok.ends_with("\r\n\r\nthe page\n# EOF\n"), "{ok}");
    // HTTP/1.0 is answered in kind; a query string is ignored.
    let old = ask(addr, "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
    assert!(old.starts_with("HTTP/1.0 200 OK\r\n"), "{old}");
    let missing = ask(addr, "GET / HTTP/1.1\r\n\r\n");
    assert!(
        missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
        "{missing}"
    );
    assert!(!missing.contains("the page"), "{missing}");
    let post = ask(addr, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(
        post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{post}"
    );
    assert!(post.contains("\r\nAllow: GET\r\n"), "{post}");
    let bad = ask(addr, "HELLO\r\n\r\n");
    assert!(bad.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{bad}");
    stop(addr, &shutdown, thread);
}

#[test]
fn a_silent_client_is_cut_off_and_shutdown_ends_the_server() {
    let (addr, shutdown, thread) = server();
    let started = std::time::Instant::now();
    // Connects, sends half a request and nothing more.
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.write_all(b"GET /metr").unwrap();
    let ok = ask(addr, "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    let waited = started.elapsed();
    assert!(
        waited >= http::READ_TIME - Duration::from_millis(100),
        "{waited:?}"
    );
    assert!(
        waited < http::READ_TIME + Duration::from_secs(2),
        "{waited:?}"
    );
    let mut cut = String::new();
    silent.read_to_string(&mut cut).unwrap();
    assert!(cut.starts_with("HTTP/1.1 408 "), "{cut}");
    stop(addr, &shutdown, thread);
}

/// Stops the server as the daemon does: the flag, then one connection.
fn stop(addr: std::net::SocketAddr, shutdown: &AtomicBool, thread: std::thread::JoinHandle<()>) {
    shutdown.store(true, Relaxed);
    let _ = TcpStream::connect(addr);
    thread.join().unwrap();
}

#[test]
fn status_lists_every_counter_of_the_groups_under_its_name() {
    let source = one_connection("c");
    let status = serde_json::to_value(crate::ops::status::status(&source)).unwrap();
    let conn = &source.conns.list()[0];
    let json = &status["connections"][0];
    for (group, counters) in [
        ("drops", conn.drops.each().to_vec()),
        ("repair", conn.repairs.each().to_vec()),
        ("tcp", conn.tcp.each().to_vec()),
    ] {
        for (name, value) in &counters {
            assert_eq!(json[group][name], *value, "{group}.{name}");
        }
    }
    assert_eq!(json["drops"].as_object().map(|o| o.len()), Some(20));
    // The counters and `enabled`.
    assert_eq!(json["repair"].as_object().map(|o| o.len()), Some(12));
    assert_eq!(status["drops"]["no_route"], source.tx.no_route.get());
    assert_eq!(
        status["drops"]["tun_read_errors"],
        source.tx.tun_errors.get()
    );
    assert_eq!(status["drops"].as_object().map(|o| o.len()), Some(3));
}

mod dashboards;
