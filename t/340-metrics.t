# `smart_limit_metrics`: Prometheus text exposition (format 0.0.4). Cumulative counters per
# room (admitted, queued, passed, bypassed, rejected, revoked, store errors...) and gauges
# (queue length, active sessions, oldest wait, mode), correct across all workers of a node.
#
# The blocks check values; the code after them parses a real scrape strictly (`promtool
# check metrics` is not packaged for Debian) and proves that the parser refuses bad text.

use lib 't/lib';
use SmartLimit::Test;
use SmartLimit::Test::Server ();
use Cwd ();
use File::Path ();
use HTTP::Tiny ();
use SmartLimit::MiniJar ();
use Test::More;

my @BAD = (
    [ "no TYPE before a sample",        "smart_limit_x_total{room=\"a\"} 1\n" ],
    [ "counter without _total",         "# HELP smart_limit_x x\n# TYPE smart_limit_x counter\nsmart_limit_x{room=\"a\"} 1\n" ],
    [ "unknown type",                   "# HELP a x\n# TYPE a summaryish\na 1\n" ],
    [ "bad value",                      "# HELP a x\n# TYPE a gauge\na{room=\"r\"} one\n" ],
    [ "unescaped quote in label",       "# HELP a x\n# TYPE a gauge\na{room=\"r\"q\"} 1\n" ],
    [ "bad escape in label",            "# HELP a x\n# TYPE a gauge\na{room=\"r\\q\"} 1\n" ],
    [ "family split in two",            "# HELP a x\n# TYPE a gauge\na{r=\"1\"} 1\n# HELP b x\n# TYPE b gauge\nb 1\na{r=\"2\"} 1\n" ],
    [ "family declared twice",          "# HELP a x\n# TYPE a gauge\na 1\n# HELP a x\n# TYPE a gauge\n" ],
    [ "duplicate series",               "# HELP a x\n# TYPE a gauge\na{r=\"1\"} 1\na{r=\"1\"} 2\n" ],
    [ "sample of another family",       "# HELP a x\n# TYPE a gauge\nb 1\n" ],
    [ "bad metric name",                "# HELP 1a x\n# TYPE 1a gauge\n1a 1\n" ],
    [ "missing final newline",          "# HELP a x\n# TYPE a gauge\na 1" ],
    [ "negative counter",               "# HELP a_total x\n# TYPE a_total counter\na_total -1\n" ],
    [ "trailing junk",                  "# HELP a x\n# TYPE a gauge\na 1 2 3\n" ],
);

plan tests => test_count() + 10 + @BAD;

run_tests();

# ---------------------------------------------------------------- strict parser

# A new browser: its own cookie jar, so it comes back from the room's cookie check (307)
# with its ticket (HTTP::Tiny follows redirects).
sub browser { HTTP::Tiny->new(timeout => 10, cookie_jar => SmartLimit::MiniJar->new) }

# Parses Prometheus text exposition 0.0.4 strictly. Returns { families => {name => {type,
# help}}, samples => [[name, {labels}, value]] } or dies with the first problem.
sub parse_exposition {
    my ($text) = @_;
    die "empty exposition\n" unless length $text;
    die "does not end with a newline\n" unless $text =~ /\n\z/;
    my $name_re = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
    my $value_re = qr/(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?Inf|NaN)/;
    my (%fam, @samples, %series, %closed);
    my $current;
    my $n = 0;
    for my $line (split /\n/, substr($text, 0, -1), -1) {
        $n++;
        die "line $n: empty line\n" if $line eq '';
        if ($line =~ /^# HELP ($name_re) (.*)$/) {
            my ($name, $help) = ($1, $2);
            die "line $n: family $name declared twice\n" if $fam{$name};
            die "line $n: family $name reopened\n" if $closed{$name};
            die "line $n: bad escape in HELP\n" if $help =~ /\\(?![\\n])/;
            $closed{$current} = 1 if defined $current;
            $fam{$name} = { help => $help };
            $current = $name;
            next;
        }
        if ($line =~ /^# TYPE ($name_re) (\S+)$/) {
            my ($name, $type) = ($1, $2);
            die "line $n: TYPE for $name does not follow its HELP\n"
                unless defined $current && $current eq $name && !$fam{$name}{type};
            die "line $n: unknown type $type\n"
                unless $type =~ /^(counter|gauge|histogram|summary|untyped)$/;
            die "line $n: counter $name does not end in _total\n"
                if $type eq 'counter' && $name !~ /_total$/;
            $fam{$name}{type} = $type;
            next;
        }
        die "line $n: unexpected comment: $line\n" if $line =~ /^#/;
        $line =~ /^($name_re)(?:\{(.*)\})? ($value_re)(?: (-?\d+))?$/
            or die "line $n: not a sample: $line\n";
        my ($name, $labels, $value) = ($1, $2 // '', $3);
        die "line $n: sample $name outside its family (" . ($current // "none") . ")\n"
            unless defined $current && $name eq $current && $fam{$name}{type};
        my %l;
        my $rest = $labels;
        while (length $rest) {
            $rest =~ s/^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)//
                or die "line $n: bad label set {$labels}\n";
            die "line $n: label $1 twice\n" if exists $l{$1};
            $l{$1} = $2 =~ s/\\(["\\n])/$1 eq 'n' ? "\n" : $1/ger;
        }
        my $key = $name . '{' . join(',', map { "$_=$l{$_}" } sort keys %l) . '}';
        die "line $n: duplicate series $key\n" if $series{$key}++;
        die "line $n: counter $name is negative\n"
            if $fam{$name}{type} eq 'counter' && $value =~ /^-/;
        push @samples, [ $name, \%l, $value ];
    }
    return { families => \%fam, samples => \@samples };
}

sub value_of {
    my ($parsed, $name, %labels) = @_;
    for my $s (@{ $parsed->{samples} }) {
        next unless $s->[0] eq $name;
        next if grep { ($s->[1]{$_} // '') ne $labels{$_} } keys %labels;
        return $s->[2];
    }
    return undef;
}

for my $bad (@BAD) {
    my ($why, $text) = @$bad;
    ok(!eval { parse_exposition($text); 1 }, "the strict parser refuses: $why");
}

# ---------------------------------------------------------------- a real scrape

SKIP: {
    my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
    skip "TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set", 10 unless $bin && $mod;
    my $root = Cwd::abs_path('t') . "/servroot/340-metrics.$$/strict/n1";
    my $port = SmartLimit::Test::Server::free_port();
    my $nginx = SmartLimit::Test::Server->new(
        index => 1, servroot => $root, binary => Cwd::abs_path($bin),
        module => Cwd::abs_path($mod),
        vars => { TEST_NGINX_PORT => $port, TEST_NGINX_PORT2 => 0,
                  TEST_NGINX_SERVROOT => $root, TEST_NGINX_HTML_DIR => "$root/html" },
    );
    $nginx->prepare;
    $nginx->write_user_files(">>> index.html\norigin page\n");
    $nginx->write_config({
        workers => 2, log_level => 'info', main_config => '',
        http_config => <<'EOF',
    smart_limit_zone shop size=1m max_active=2;
    smart_limit_zone "other-room" size=1m max_active=1 new_per_minute=5 session=5m;
EOF
        config => <<'EOF',
    location / { smart_limit shop; root html; }
    location /o/ { smart_limit other-room; alias html/; }
    location = /metrics { smart_limit_metrics; }
    location = /control { smart_limit_control; }
EOF
    });
    my ($up, $msg) = $nginx->start(2);
    ok($up, 'nginx with two rooms starts') or diag($msg);
    my $http = HTTP::Tiny->new(timeout => 10);
    my $base = "http://127.0.0.1:$port";
    # Traffic: 5 new clients on shop (2 admitted, 3 queued), 2 on other-room, one poll.
    browser()->get("$base/") for 1 .. 5;
    browser()->get("$base/o/") for 1 .. 2;
    my $first = $http->get("$base/metrics");
    is($first->{status}, 200, 'GET /metrics answers 200');
    like($first->{headers}{'content-type'} // '', qr{^text/plain; version=0\.0\.4; charset=utf-8$},
         'content type of the 0.0.4 text format');
    my $p = eval { parse_exposition($first->{content}) };
    ok($p, 'the scrape parses strictly') or diag("$@\n$first->{content}");
    $p ||= { samples => [], families => {} };
    my @want_counters = map { "smart_limit_${_}_total" }
        qw(admitted queued passed bypassed waiting_answers rejected expired revoked store_errors);
    my @want_gauges = qw(smart_limit_queue_length smart_limit_active_sessions
        smart_limit_oldest_wait_seconds smart_limit_max_active smart_limit_up smart_limit_mode);
    my @missing;
    for my $room ('shop', 'other-room') {
        for my $m (@want_counters, @want_gauges) {
            push @missing, "$m\{room=$room}" unless defined value_of($p, $m, room => $room);
        }
    }
    is_deeply(\@missing, [], 'every counter and gauge is there for both rooms');
    my %types = map { ($_ => $p->{families}{$_}{type} // 'none') } @want_counters, @want_gauges;
    is_deeply([ grep { $types{$_} ne 'counter' } @want_counters ], [], 'counters are typed counter');
    is_deeply([ map { value_of($p, $_->[0], room => $_->[1]) // 'undef' }
                ['smart_limit_admitted_total', 'shop'], ['smart_limit_queued_total', 'shop'],
                ['smart_limit_queue_length', 'shop'], ['smart_limit_active_sessions', 'shop'],
                ['smart_limit_admitted_total', 'other-room'], ['smart_limit_queue_length', 'other-room'],
                ['smart_limit_new_per_minute', 'other-room']],
              [2, 3, 3, 2, 1, 1, 5], 'values of the first scrape')
        or diag($first->{content});
    # More traffic, then counters only grow.
    browser()->get("$base/") for 1 .. 3;
    $http->post("$base/control?room=shop&mode=reject");
    browser()->get("$base/") for 1 .. 2;
    my $second = $http->get("$base/metrics");
    my $q = eval { parse_exposition($second->{content}) } || { samples => [] };
    my @backwards;
    for my $s (@{ $p->{samples} }) {
        next unless ($p->{families}{ $s->[0] }{type} // '') eq 'counter';
        my $v2 = value_of($q, $s->[0], %{ $s->[1] });
        push @backwards, "$s->[0]\{$s->[1]{room}}: $s->[2] -> " . ($v2 // 'undef')
            unless defined $v2 && $v2 >= $s->[2];
    }
    is_deeply(\@backwards, [], 'cumulative counters never go backwards between scrapes');
    is_deeply([ value_of($q, 'smart_limit_rejected_total', room => 'shop'),
                value_of($q, 'smart_limit_mode', room => 'shop', mode => 'reject'),
                value_of($q, 'smart_limit_mode', room => 'shop', mode => 'fifo') ],
              [2, 1, 0], 'a closed room: rejections counted, mode gauge says reject')
        or diag($second->{content});
    $nginx->stop;
    my $log = $nginx->error_log;
    unlike($log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log')
        or diag($log);
    File::Path::remove_tree("t/servroot/340-metrics.$$") unless $ENV{TEST_NGINX_NO_CLEAN};
}

__DATA__

=== TEST 1: counters and gauges after some traffic
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    map $http_x_staff $sl_bypass { default ""; yes 1; }
--- config
    location / { smart_limit shop; smart_limit_bypass $sl_bypass; root html; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
--- steps
m GET /metrics => 200; header Content-Type =~ /^text\/plain; version=0\.0\.4; charset=utf-8$/; header Cache-Control =~ /no-store/; body =~ /^# HELP smart_limit_admitted_total \S.*$/m; body =~ /^# TYPE smart_limit_admitted_total counter$/m; body =~ /^smart_limit_admitted_total\{room="shop"\} 0$/m; body =~ /^smart_limit_up\{room="shop"\} 1$/m
A GET / => 200
repeat 3: A GET / => 200
B GET / => 503
C GET / => 503
repeat 2: C GET / => 503
S GET / X-Staff: yes => 200
m GET /metrics => 200; body =~ /^smart_limit_admitted_total\{room="shop"\} 1$/m; body =~ /^smart_limit_passed_total\{room="shop"\} 3$/m; body =~ /^smart_limit_queued_total\{room="shop"\} 2$/m; body =~ /^smart_limit_waiting_answers_total\{room="shop"\} 4$/m; body =~ /^smart_limit_bypassed_total\{room="shop"\} 1$/m; body =~ /^smart_limit_rejected_total\{room="shop"\} 0$/m; body =~ /^smart_limit_revoked_total\{room="shop"\} 0$/m; body =~ /^smart_limit_store_errors_total\{room="shop"\} 0$/m; body =~ /^smart_limit_queue_length\{room="shop"\} 2$/m; body =~ /^smart_limit_active_sessions\{room="shop"\} 1$/m; body =~ /^smart_limit_max_active\{room="shop"\} 1$/m; body =~ /^smart_limit_mode\{room="shop",mode="fifo"\} 1$/m; body =~ /^smart_limit_mode\{room="shop",mode="reject"\} 0$/m; body =~ /^# TYPE smart_limit_queue_length gauge$/m; body =~ /^smart_limit_oldest_wait_seconds\{room="shop"\} \d+$/m; body !~ /^smart_limit_new_per_minute\{/m
m HEAD /metrics => 200; body !~ /./
m POST /metrics => 405

=== TEST 2: one node, many workers: every scrape, from any worker, gives the node's totals
--- workers: 4
--- http_config
    smart_limit_zone shop size=1m max_active=5;
--- config
    location / { smart_limit shop; root html; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
--- steps
parallel 24 p GET / => 200|503; count 200 == 5; count 503 == 19
repeat 12: m GET /metrics => 200; body =~ /^smart_limit_admitted_total\{room="shop"\} 5$/m; body =~ /^smart_limit_queued_total\{room="shop"\} 19$/m; body =~ /^smart_limit_queue_length\{room="shop"\} 19$/m; body =~ /^smart_limit_active_sessions\{room="shop"\} 5$/m
parallel 24 p GET / => 200|503; count 200 == 5; count 503 == 19
repeat 12: m GET /metrics => 200; body =~ /^smart_limit_passed_total\{room="shop"\} 5$/m; body =~ /^smart_limit_waiting_answers_total\{room="shop"\} 38$/m; body =~ /^smart_limit_queue_length\{room="shop"\} 19$/m

=== TEST 3: counters survive a reload (cumulative), and the metrics location is never gated
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    smart_limit shop;
    location / { root html; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 503
# the room is full, the scraper has no ticket, and still gets its answer
repeat 3: m GET /metrics => 200; body =~ /^smart_limit_admitted_total\{room="shop"\} 1$/m
reload
m GET /metrics => 200; body =~ /^smart_limit_admitted_total\{room="shop"\} 1$/m; body =~ /^smart_limit_queued_total\{room="shop"\} 1$/m
C GET / => 503
m GET /metrics => 200; body =~ /^smart_limit_queued_total\{room="shop"\} 2$/m

=== TEST 4: a revoke and a closed room show in the counters; the mode gauge follows the switch
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location = /metrics { smart_limit_metrics; }
    location = /control { smart_limit_control; }
--- steps
A GET / => 200
A GET /logout => 200
op POST /control?room=shop&mode=reject => 200
B GET / => 503
m GET /metrics => 200; body =~ /^smart_limit_revoked_total\{room="shop"\} 1$/m; body =~ /^smart_limit_rejected_total\{room="shop"\} 1$/m; body =~ /^smart_limit_active_sessions\{room="shop"\} 0$/m; body =~ /^smart_limit_mode\{room="shop",mode="reject"\} 1$/m; body =~ /^smart_limit_mode\{room="shop",mode="fifo"\} 0$/m; body =~ /^smart_limit_mode_overridden\{room="shop"\} 1$/m

=== TEST 5: smart_limit_metrics takes no argument
--- config
    location = /metrics { smart_limit_metrics on; }
--- must_fail
--- error_log
invalid number of arguments in "smart_limit_metrics" directive

=== TEST 6: smart_limit_metrics is a location directive
--- http_config
    smart_limit_metrics;
--- must_fail
--- error_log
"smart_limit_metrics" directive is not allowed here

=== TEST 7: the module names its version: one notice at start-up, and smart_limit_build_info
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location = /metrics { smart_limit_metrics; }
--- steps
m GET /metrics => 200; body =~ /^# TYPE smart_limit_build_info gauge$/m; body =~ /^smart_limit_build_info\{version="\d+\.\d+\.\d+",nginx="1\.\d+\.\d+"\} 1$/m
--- error_log
[notice] [0-9]+#[0-9]+: smart_limit/[0-9]+[.][0-9]+[.][0-9]+ [(]built for nginx/1[.][0-9]+[.][0-9]+[)]
