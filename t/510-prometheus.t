# contrib/: the Prometheus rules, the example scrape config and the Grafana dashboard, against
# a real Prometheus (Debian's `prometheus` 2.42 and its `promtool`) scraping a real nginx.
#
# - promtool: `check rules`, `test rules` (contrib/prometheus/smart-limit.rules.test.yml: when
#   each alert fires and when it must not), `check config` on the example and on this test's
#   own config.
# - one nginx (a shm room with admitted and waiting clients, a room whose line keeps growing, a
#   `sync=` room and a `smart_limit_rate_zone` on a redis-server) scraped once a second by a
#   Prometheus on its own loopback port and its own temp storage, with the contrib rules loaded.
# - every metric name used by the rules (as Prometheus loaded them, annotations included) and by
#   the dashboard must be in a real scrape of the module, with the labels the selectors use: a
#   renamed metric fails here. Every dashboard query is run on that Prometheus and must return
#   series carrying the labels its legend names; every template variable must find its values.
# - Prometheus's answer for the shm room's queue length and active sessions equals the module's;
#   every rule is evaluated with health "ok"; SmartLimitLineGrowing goes pending for the growing
#   room (not for the steady one).

use strict;
use warnings;
use lib 't/lib';
use SmartLimit::Test::Server ();
use Cwd ();
use File::Path ();
use File::Temp ();
use HTTP::Tiny ();
use SmartLimit::MiniJar ();
use JSON::PP ();
use POSIX ();
use Test::More;
use Time::HiRes ();

my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
    unless $bin && $mod;

my $T0 = Time::HiRes::time();
my $RULES = Cwd::abs_path('contrib/prometheus/smart-limit.rules.yml');
my $RULES_TEST = Cwd::abs_path('contrib/prometheus/smart-limit.rules.test.yml');
my $EXAMPLE = Cwd::abs_path('contrib/prometheus/prometheus.yml');
my $DASHBOARD = Cwd::abs_path('contrib/grafana/smart-limit.json');
# Names in the rules' annotations that are directives, not metrics.
my %NOT_METRICS = map { $_ => 1 } qw(smart_limit_metrics smart_limit_zone smart_limit_rate_zone);

my $run = \&SmartLimit::Test::Server::run_capture;
my $wait_until = \&SmartLimit::Test::Server::wait_until;
my $json = JSON::PP->new->utf8->canonical;
my $http = HTTP::Tiny->new(timeout => 5);

my @tools = grep { !-x "/usr/bin/$_" && !`command -v $_ 2>/dev/null` } qw(prometheus promtool);
if (@tools) {
    fail("prometheus and promtool are installed (apt-get install prometheus; scripts/test does)");
    done_testing();
    exit;
}

# ---------------------------------------------------------------- promtool, offline

{
    my ($rc, $out) = $run->('promtool', 'check', 'rules', $RULES);
    ok($rc == 0 && $out =~ /SUCCESS: (\d+) rules found/, 'promtool check rules: the contrib rules')
        or diag($out);
    ($rc, $out) = $run->('promtool', 'test', 'rules', $RULES_TEST);
    ok($rc == 0 && $out =~ /SUCCESS/, 'promtool test rules: every alert fires when it should, and only then')
        or diag($out);
    ($rc, $out) = $run->('promtool', 'check', 'config', $EXAMPLE);
    ok($rc == 0 && $out =~ /SUCCESS: 1 rule files found/, 'promtool check config: the example scrape config and its rule file')
        or diag($out);
}
my $RULE_COUNT = () = SmartLimit::Test::Server::slurp($RULES) =~ /^\s*- (?:alert|record):/mg;

# ---------------------------------------------------------------- the dashboard, offline

my $dash = eval { $json->decode(SmartLimit::Test::Server::slurp($DASHBOARD)) };
ok($dash, 'the dashboard is JSON') or diag($@);
$dash ||= {};
my (@targets, %vars);
{
    # Rows may hold panels (collapsed rows).
    my @panels = map { ($_, @{ $_->{panels} || [] }) } @{ $dash->{panels} || [] };
    for my $p (@panels) {
        push @targets, map { { %$_, panel => $p->{title} } } @{ $p->{targets} || [] };
    }
    %vars = map { ($_->{name} => $_) } @{ $dash->{templating}{list} || [] };
    # What a query variable runs: `query` (a string, or {query => ...} in Grafana 10's form).
    for my $v (grep { ($_->{type} // '') eq 'query' } values %vars) {
        $v->{q} = ref $v->{query} ? $v->{query}{query} : $v->{query};
    }
    my @problems;
    push @problems, "schemaVersion " . ($dash->{schemaVersion} // 'none') . " < 36"
        unless ($dash->{schemaVersion} // 0) >= 36;
    push @problems, "no datasource variable" unless ($vars{datasource}{type} // '') eq 'datasource';
    push @problems, "no DS_PROMETHEUS input"
        unless grep { ($_->{name} // '') eq 'DS_PROMETHEUS' } @{ $dash->{__inputs} || [] };
    push @problems, "room is not a label_values variable"
        unless ($vars{room}{q} // '') =~ /^label_values\(.*,\s*room\)$/;
    push @problems, "fewer than 20 queries (" . @targets . ")" if @targets < 20;
    for my $t (@targets) {
        push @problems, "$t->{panel}: a target without expr" unless ($t->{expr} // '') =~ /\S/;
        push @problems, "$t->{panel}: datasource is not the variable"
            unless ($t->{datasource}{uid} // '') eq '${datasource}';
    }
    is_deeply(\@problems, [], 'the dashboard: schema >= 36, datasource input and variable, a room variable, '
              . scalar(@targets) . ' queries on ${datasource}');
}

# ---------------------------------------------------------------- name checks

# Metric names a PromQL text uses: smart_limit_* identifiers (not recording rules, which have
# colons, not $variables).
sub metric_names {
    my ($text) = @_;
    my %n;
    $n{$1} = 1 while $text =~ /(?<![\w:\$])(smart_limit_[A-Za-z0-9_]+)(?![\w:])/g;
    return sort keys %n;
}

# Problems of a PromQL text against a scrape ({name => {label => 1}}): unknown metric names,
# label matchers on labels the metric does not have, by/on/without clauses naming labels none
# of its metrics has (job and instance are Prometheus's own).
sub name_problems {
    my ($text, $scrape, $skip) = @_;
    $skip ||= {};
    my @p;
    my %labels = (job => 1, instance => 1, le => 1);
    for my $n (metric_names($text)) {
        next if $skip->{$n};
        if (!$scrape->{$n}) { push @p, "$n is not in the scrape"; next }
        %labels = (%labels, %{ $scrape->{$n} });
    }
    while ($text =~ /(?<![\w:])(smart_limit_[A-Za-z0-9_]+)\{([^}]*)\}/g) {
        my ($n, $m) = ($1, $2);
        next unless $scrape->{$n};
        while ($m =~ /([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g) {
            push @p, "$n has no label $1" unless $scrape->{$n}{$1} || $1 eq 'job' || $1 eq 'instance';
        }
    }
    while ($text =~ /\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g) {
        for my $l (grep { length } split /\s*,\s*/, $1 =~ s/^\s+|\s+$//gr) {
            push @p, "no metric of the expression has label $l (by/on clause)" unless $labels{$l};
        }
    }
    return @p;
}

# The checker itself must see a renamed metric and a wrong label.
{
    my $fake = { smart_limit_queue_length => { room => 1 }, smart_limit_rate_probability => { zone => 1 } };
    my @p = (name_problems('rate(smart_limit_queue_lenght{room="a"}[5m]) > 0', $fake),
             name_problems('smart_limit_rate_probability{room=~"$room"}', $fake),
             name_problems('max by (zone) (smart_limit_queue_length)', $fake));
    is(scalar(@p), 3, 'the name check finds a misspelt metric, a wrong label matcher and a wrong by() label')
        or diag(explain(\@p));
    is_deeply([ name_problems('sum by (room) (rate(smart_limit_queue_length{room=~"$room", job=~"$job"}[$__rate_interval])) '
                              . '+ smart_limit:line_inflow:rate5m', $fake) ], [],
              'and passes a correct expression (recording rules and $variables are not metrics)');
}

# ---------------------------------------------------------------- nginx, redis

my $base_dir = Cwd::abs_path('t') . "/servroot/510-prometheus.$$";
my $root = "$base_dir/n1";
my $port = SmartLimit::Test::Server::free_port();
my $redis_port = SmartLimit::Test::Server::free_port();
my $prom_port = SmartLimit::Test::Server::free_port();
my ($nginx, $redis, $prom_pid);

END {
    # Whatever happened, nothing started here survives the file.
    if ($prom_pid && SmartLimit::Test::Server::pid_alive($prom_pid)) {
        kill 'KILL', $prom_pid;
        waitpid($prom_pid, 0);
    }
    $nginx->stop if $nginx;
    $redis->stop if $redis;
}

$redis = SmartLimit::Test::Redis->new(port => $redis_port, dir => "$base_dir/redis");
my ($redis_up, $redis_msg) = $redis->start;
ok($redis_up, 'redis-server starts') or diag($redis_msg);

$nginx = SmartLimit::Test::Server->new(
    index => 1, servroot => $root, binary => Cwd::abs_path($bin), module => Cwd::abs_path($mod),
    vars => { TEST_NGINX_PORT => $port, TEST_NGINX_PORT2 => 0, TEST_NGINX_SERVROOT => $root,
              TEST_NGINX_HTML_DIR => "$root/html" },
);
$nginx->prepare;
$nginx->write_user_files(">>> index.html\norigin page\n");
$nginx->write_config({
    workers => 1, log_level => 'info', main_config => '',
    http_config => <<"EOF",
    smart_limit_zone shop size=1m max_active=2 presence=5m new_per_minute=100 flood=off;
    smart_limit_zone line size=1m max_active=1 presence=5m flood=off;
    smart_limit_zone fleet size=1m max_active=1 presence=5m flood=off store=redis
                     redis=127.0.0.1:$redis_port sync=1s;
    smart_limit_rate_zone api rate=5r/s redis=127.0.0.1:$redis_port interval=1s timeout=900ms;
EOF
    config => <<'EOF',
    location / { smart_limit shop; root html; }
    location /line/ { smart_limit line; alias html/; }
    location /fleet/ { smart_limit fleet; alias html/; }
    location /api/ { smart_limit_rate api; alias html/; }
    location = /metrics { smart_limit_metrics; }
EOF
});
my ($up, $msg) = $nginx->start(1);
ok($up, 'nginx with three rooms and a rate zone starts') or diag($msg);

my $base = "http://127.0.0.1:$port";
# A new browser each time (its own jar: it comes back from the cookie check's 307 with its ticket).
sub newcomer { HTTP::Tiny->new(timeout => 5, cookie_jar => SmartLimit::MiniJar->new)->get("$base$_[0]")->{status} }

my @st = map { newcomer('/') } 1 .. 5;
is("@st", "200 200 503 503 503", 'room shop: two clients admitted, three waiting');
newcomer('/line/') for 1 .. 2;
newcomer('/fleet/') for 1 .. 2;
$http->get("$base/api/") for 1 .. 20;

# The module's own scrape: {name => {label => 1}} and the samples.
sub scrape {
    my $r = $http->get("$base/metrics");
    my (%names, @samples);
    return ({}, []) unless $r->{success};
    for my $line (split /\n/, $r->{content}) {
        next if $line =~ /^#/;
        next unless $line =~ /^(\w+)(?:\{(.*)\})? (\S+)$/;
        my ($n, $l, $v) = ($1, $2 // '', $3);
        my %l;
        $l{$1} = $2 while $l =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
        $names{$n}{$_} = 1 for keys %l;
        $names{$n} ||= {};
        push @samples, [ $n, \%l, $v ];
    }
    return (\%names, \@samples);
}
sub sample_of {
    my ($samples, $name, %l) = @_;
    for my $s (@$samples) {
        next unless $s->[0] eq $name;
        next if grep { ($s->[1]{$_} // '') ne $l{$_} } keys %l;
        return $s->[2];
    }
    return undef;
}

# Every name the dashboard uses must appear; the sync ages appear after the first syncs.
my @dash_names = do {
    my %n;
    $n{$_} = 1 for map { metric_names($_->{expr} // '') } @targets;
    $n{$_} = 1 for map { metric_names($_->{q} // '') } values %vars;
    sort keys %n;
};
my ($scrape_names, $samples) = ({}, []);
$wait_until->(15, sub {
    ($scrape_names, $samples) = scrape();
    return !grep { !$scrape_names->{$_} } @dash_names;
});
my %dash_problems;
for my $t (@targets, map { { expr => $_->{q}, panel => "variable $_->{name}" } }
                     grep { $_->{q} } values %vars) {
    $dash_problems{"$t->{panel}: $_"} = 1 for name_problems($t->{expr}, $scrape_names);
}
is_deeply([ sort keys %dash_problems ], [],
          'every metric the dashboard uses (' . scalar(@dash_names) . ') is in the scrape, with the labels its queries use')
    or diag(join("\n", sort(keys %dash_problems), "scrape has: " . join(' ', sort keys %$scrape_names)));

# ---------------------------------------------------------------- prometheus

my $prom_dir = "$base_dir/prometheus";
File::Path::make_path("$prom_dir/data");
my $prom_conf = "$prom_dir/prometheus.yml";
SmartLimit::Test::Server::spew($prom_conf, <<"EOF");
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $RULES
scrape_configs:
  - job_name: smart_limit
    metrics_path: /metrics
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
{
    my ($rc, $out) = $run->('promtool', 'check', 'config', $prom_conf);
    ok($rc == 0 && $out =~ /SUCCESS: $RULE_COUNT rules found/,
       "promtool check config: this test's config, with the contrib rules ($RULE_COUNT rules)")
        or diag($out);
}

$prom_pid = fork;
die "fork: $!" unless defined $prom_pid;
if (!$prom_pid) {
    open STDIN, '<', '/dev/null';
    open STDOUT, '>', "$prom_dir/prometheus.log";
    open STDERR, '>&', \*STDOUT;
    exec('prometheus', "--config.file=$prom_conf", "--storage.tsdb.path=$prom_dir/data",
         "--web.listen-address=127.0.0.1:$prom_port", '--log.level=warn',
         '--storage.tsdb.retention.time=1h') or POSIX::_exit(127);
}
my $papi = "http://127.0.0.1:$prom_port";
my $ready = $wait_until->(20, sub {
    return 1 unless SmartLimit::Test::Server::pid_alive($prom_pid);
    my $r = $http->get("$papi/-/ready");
    return $r->{status} == 200;
});
ok($ready && SmartLimit::Test::Server::pid_alive($prom_pid), "prometheus is ready on 127.0.0.1:$prom_port")
    or diag(SmartLimit::Test::Server::slurp("$prom_dir/prometheus.log"));

sub api {
    my ($path, %q) = @_;
    my $url = "$papi/api/v1/$path";
    $url .= '?' . $http->www_form_urlencode(\%q) if %q;
    my $r = $http->get($url);
    my $d = eval { $json->decode($r->{content}) } || { status => "http $r->{status}", error => $r->{content} };
    return $d;
}
sub query { api('query', query => $_[0]) }

# The growing room: one newcomer every pass of the polling loops below.
my $line_joins = 0;
sub grow { newcomer('/line/'); $line_joins++ }

# Prometheus's value of the shm room's gauges is the module's own.
my ($prom_q, $prom_a, $mod_q, $mod_a);
$wait_until->(20, sub {
    grow();
    my (undef, $s) = scrape();
    ($mod_q, $mod_a) = (sample_of($s, 'smart_limit_queue_length', room => 'shop'),
                        sample_of($s, 'smart_limit_active_sessions', room => 'shop'));
    my $q = query('smart_limit_queue_length{job="smart_limit",room="shop"}');
    my $a = query('smart_limit_active_sessions{job="smart_limit",room="shop"}');
    $prom_q = $q->{data}{result}[0]{value}[1];
    $prom_a = $a->{data}{result}[0]{value}[1];
    Time::HiRes::sleep(0.25);
    return defined $prom_q && defined $prom_a && $prom_q eq ($mod_q // '') && $prom_a eq ($mod_a // '');
});
is_deeply([ $prom_q, $prom_a ], [ $mod_q, $mod_a ],
          "prometheus's smart_limit_queue_length and smart_limit_active_sessions of room shop are the module's")
    or diag(explain([ $prom_q, $prom_a, $mod_q, $mod_a ]));
is_deeply([ $mod_q, $mod_a ], [ 3, 2 ], "and they are the room's: 3 waiting, 2 admitted");
is(query('up{job="smart_limit"}')->{data}{result}[0]{value}[1], '1', 'the scrape target is up');

# Every rule loaded and evaluated with health "ok".
my ($rules, @rule_state);
$wait_until->(15, sub {
    grow();
    $rules = api('rules');
    @rule_state = map { @{ $_->{rules} || [] } } @{ $rules->{data}{groups} || [] };
    Time::HiRes::sleep(0.25);
    return @rule_state == $RULE_COUNT
        && !grep { ($_->{health} // '') ne 'ok' || ($_->{lastEvaluation} // '') =~ /^0001-/ } @rule_state;
});
is_deeply([ sort map { $_->{name} } @{ $rules->{data}{groups} || [] } ], [ 'smart_limit.alerts', 'smart_limit.records' ],
          'both rule groups are loaded');
is_deeply([ map { "$_->{name}: " . ($_->{health} // '?') . ' ' . ($_->{lastError} // '') }
            grep { ($_->{health} // '') ne 'ok' } @rule_state ], [],
          "all $RULE_COUNT rules (" . scalar(@rule_state) . " loaded) evaluated with health ok");

# Names in the rules as Prometheus loaded them: queries and annotations.
{
    my %records = map { ($_->{name} => 1) } grep { $_->{type} eq 'recording' } @rule_state;
    my (%problems, %names);
    for my $r (@rule_state) {
        my $text = join "\n", $r->{query}, values %{ $r->{annotations} || {} };
        $names{$_} = 1 for grep { !$NOT_METRICS{$_} } metric_names($text);
        $problems{"$r->{name}: $_"} = 1 for name_problems($r->{query}, $scrape_names);
        $problems{"$r->{name} (annotations): $_"} = 1
            for name_problems(join("\n", values %{ $r->{annotations} || {} }), $scrape_names, \%NOT_METRICS);
        while ($r->{query} =~ /(?<![\w:])(smart_limit:[\w:]+)/g) {
            $problems{"$r->{name}: recording rule $1 is not defined"} = 1 unless $records{$1};
        }
    }
    is_deeply([ sort keys %problems ], [],
              'every metric the rules use (' . scalar(keys %names) . ') is in the scrape, with the labels they use')
        or diag(join("\n", sort keys %problems));
}

# The alert works on live data: the room whose line grows goes pending, the steady one not.
my $alerts;
my $pending = $wait_until->(15, sub {
    grow();
    $alerts = api('alerts');
    Time::HiRes::sleep(0.25);
    return grep { $_->{labels}{alertname} eq 'SmartLimitLineGrowing' && $_->{labels}{room} eq 'line'
                  && $_->{state} eq 'pending' } @{ $alerts->{data}{alerts} || [] };
});
ok($pending, "SmartLimitLineGrowing is pending for the growing room ($line_joins newcomers joined it)")
    or diag($json->encode($alerts));
is_deeply([ map { "$_->{labels}{alertname} $_->{labels}{room}" }
            grep { ($_->{labels}{room} // '') eq 'shop' } @{ $alerts->{data}{alerts} || [] } ], [],
          'and no alert for the steady room');

# Every dashboard query runs on Prometheus and returns series with the labels its legend names.
{
    my %subst = ('$__rate_interval' => '1m', '$job' => 'smart_limit', '$instance' => '.*',
                 '$room' => '.*', '$zone' => '.*', '${datasource}' => 'x');
    my @bad;
    for my $t (@targets) {
        my $e = $t->{expr};
        $e =~ s/\Q$_\E/$subst{$_}/g for sort { length $b <=> length $a } keys %subst;
        my $r = query($e);
        if (($r->{status} // '') ne 'success') {
            push @bad, "$t->{panel} [$t->{refId}]: " . ($r->{error} // $r->{status});
            next;
        }
        my @res = @{ $r->{data}{result} || [] };
        if (!@res) { push @bad, "$t->{panel} [$t->{refId}]: no data for $e"; next }
        my @want = ($t->{legendFormat} // '') =~ /\{\{\s*(\w+)\s*\}\}/g;
        for my $l (@want) {
            push @bad, "$t->{panel} [$t->{refId}]: legend label $l missing from the result"
                if grep { !defined $_->{metric}{$l} } @res;
        }
    }
    is_deeply(\@bad, [], 'each of the ' . scalar(@targets) . ' dashboard queries returns data on Prometheus, legend labels included')
        or diag(join("\n", @bad));
    my %expect = (job => 'smart_limit', instance => "127.0.0.1:$port", room => 'shop', zone => 'api');
    my @missing;
    for my $v (grep { ($_->{type} // '') eq 'query' } values %vars) {
        my ($sel, $label) = ($v->{q} // '') =~ /^label_values\((.*),\s*(\w+)\)$/
            or do { push @missing, "$v->{name}: not label_values(...)"; next };
        $sel =~ s/\Q$_\E/$subst{$_}/g for keys %subst;
        my $r = api("label/$label/values", 'match[]' => $sel);
        push @missing, "$v->{name}: $expect{$v->{name}} not among " . $json->encode($r->{data} // $r)
            unless grep { $_ eq ($expect{$v->{name}} // '') } @{ $r->{data} || [] };
    }
    is_deeply(\@missing, [], 'the template variables (' . join(', ', sort keys %vars) . ') find their values')
        or diag(join("\n", @missing));
}

# ---------------------------------------------------------------- stop everything

kill 'TERM', $prom_pid;
my $gone = $wait_until->(10, sub { waitpid($prom_pid, POSIX::WNOHANG()) != 0 });
ok($gone, 'prometheus stops on TERM');
unless ($gone) { kill 'KILL', $prom_pid; waitpid($prom_pid, 0) }
undef $prom_pid;
ok(!SmartLimit::Test::Server::port_open($prom_port), 'nothing listens on its port any more');
$nginx->stop;
$redis->stop;
unlike($nginx->error_log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log')
    or diag($nginx->log_tail(20));
undef $nginx;
undef $redis;
File::Path::remove_tree($base_dir) unless $ENV{TEST_NGINX_NO_CLEAN};
note(sprintf "%.1f s", Time::HiRes::time() - $T0);
done_testing();
