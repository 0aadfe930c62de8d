package SmartLimit::Test::Runner;

# Runs Test::Base blocks: one fresh servroot (per instance) per block, the
# steps, then the error-log checks. Every block emits exactly the number of
# tests count_block() announced, also when it aborts half-way.

use strict;
use warnings;

use Cwd ();
use File::Basename ();
use File::Path ();
use File::Spec ();
use File::Temp ();
use JSON::PP ();
use POSIX ();
use Storable ();
use Test::More ();
use Time::HiRes ();
use Scalar::Util ();

use SmartLimit::Test::HTTP ();
use SmartLimit::Test::Server ();
use SmartLimit::Test::Shell ();
use SmartLimit::Test::Steps ();

our $VERBOSE = $ENV{TEST_NGINX_VERBOSE};
my $TB = Test::More->builder;

my $HARNESS_DIR = File::Basename::dirname(Cwd::abs_path(__FILE__));    # t/lib/SmartLimit/Test
my $SERVROOT_BASE = Cwd::abs_path("$HARNESS_DIR/../../..") . '/servroot';    # t/servroot

# Processes to clean up if the script dies or is interrupted.
my %LIVE;    # "nginx:<n>" => obj, "redis" => obj, "sh:<pid>" => obj
my $MAIN_PID = $$;

END {
    if ($$ == $MAIN_PID) {
        my $status = $?;
        _cleanup_live();
        $? = $status;
    }
}
for my $sig (qw(INT TERM)) {
    $SIG{$sig} = sub { _cleanup_live(); POSIX::_exit(130) };
}

sub _cleanup_live {
    for my $k (sort keys %LIVE) {
        my $o = delete $LIVE{$k};
        eval { $o->stop };
    }
}

sub note_v { print STDERR "# [harness] @_\n" if $VERBOSE }

sub _bool_section {
    my ($block, $name) = @_;
    return exists $block->{$name};
}

sub _section {
    my ($block, $name) = @_;
    return undef unless exists $block->{$name};
    my $v = $block->$name;
    return defined $v ? $v : '';
}

sub _lines {
    my ($text) = @_;
    return grep { /\S/ } map { s/^\s+|\s+$//gr } split /\n/, ($text // '');
}

# An error_log line: a perl regex, or /regex/flags. A literal nginx level in
# brackets ("[error]", "[warn]"...) means that text, not a character class.
sub _log_regex {
    my ($line) = @_;
    $line =~ s/(?<!\\)\[(debug|info|notice|warn|error|crit|alert|emerg)\]/\\[$1\\]/g;
    if ($line =~ m{^/(.*)/([imsx]*)$}) {
        my ($p, $f) = ($1, $2);
        return length $f ? qr/(?$f)$p/ : qr/$p/;
    }
    return qr/$line/;
}

my %KNOWN_SECTIONS = map { ($_ => 1) } qw(main_config http_config config steps user_files
    redis instances workers master_process must_fail error_log no_error_log no_check_error_log
    timeout log_level follow_redirects later ONLY SKIP LAST);

# Parses a block's steps (dies with the block name on a syntax error).
sub _plan_block {
    my ($block) = @_;
    return $block->{_sl_plan} if $block->{_sl_plan};
    my $name = $block->name;
    my $instances = _section($block, 'instances') // 1;
    die "TEST '$name': --- instances must be a number\n" unless $instances =~ /^\d+$/ && $instances >= 1;
    my %sections = map { ($_ => 1) } @{ $block->{_section_order}[0] || [] };
    for my $sec (sort keys %sections) {
        next if $KNOWN_SECTIONS{$sec} || $sec =~ /^(?:main_config|http_config|config)\w*$/;
        die "TEST '$name': unknown section '--- $sec' (known: "
            . join(', ', sort keys %KNOWN_SECTIONS) . ", config*, http_config*, main_config*)\n";
    }
    my $ctx = {
        instances => $instances,
        redis     => _bool_section($block, 'redis'),
        sections  => \%sections,
    };
    my @steps = eval { SmartLimit::Test::Steps::parse(_section($block, 'steps'), $ctx) };
    die "TEST '$name': $@" if $@;
    my $follow = _section($block, 'follow_redirects') // 1;
    $follow =~ s/^\s+|\s+$//g;
    die "TEST '$name': --- follow_redirects must be 0 or 1, not '$follow'\n" unless $follow =~ /^[01]$/;
    my $master = _section($block, 'master_process') // 'on';
    $master =~ s/^\s+|\s+$//g;
    die "TEST '$name': --- master_process must be on or off, not '$master'\n"
        unless $master =~ /^(?:on|off)$/;
    # One process and no workers: the steps that signal or count workers have nothing to act on.
    if ($master eq 'off') {
        for my $s (grep { $_->{type} =~ /^(?:reload|reload-expect-fail|kill-worker)$/ } @steps) {
            die "TEST '$name': '$s->{line}' needs workers, and --- master_process is off\n";
        }
    }
    # Instances that are not started with the block: a step `nginx-start @N` starts them
    # (a node that joins a running fleet).
    my %later = map { ($_ => 1) } split /[\s,]+/, (_section($block, 'later') // '');
    for my $i (keys %later) {
        die "TEST '$name': --- later must list instances (1..$instances), not '$i'\n"
            unless $i =~ /^\d+$/ && $i >= 1 && $i <= $instances;
    }
    my @error_log = _lines(_section($block, 'error_log'));
    my @no_error_log = _lines(_section($block, 'no_error_log'));
    for my $re (@error_log, @no_error_log) {
        eval { _log_regex($re); 1 } or die "TEST '$name': bad error_log regex '$re': $@";
    }
    my $must_fail = _bool_section($block, 'must_fail');
    die "TEST '$name': a --- must_fail block runs no steps\n" if $must_fail && @steps;
    my $count;
    if ($must_fail) {
        $count = 1 + @error_log;
    } else {
        $count = 0;
        $count += $_->{tests} for @steps;
        $count += 1 unless _bool_section($block, 'no_check_error_log');
        $count += @error_log + @no_error_log;
    }
    return $block->{_sl_plan} = {
        steps => \@steps, instances => $instances, count => $count, follow => $follow, ctx => $ctx,
        master => $master, later => \%later,
        error_log => \@error_log, no_error_log => \@no_error_log, must_fail => $must_fail,
    };
}

sub count_tests {
    my ($blocks) = @_;
    my $n = 0;
    $n += _plan_block($_)->{count} for @$blocks;
    return $n;
}

# ------------------------------------------------------------------ a block

sub run_block {
    my ($block, $env) = @_;
    my $plan = _plan_block($block);
    my $st = {
        block   => $block,
        name    => $block->name,
        plan    => $plan,
        emitted => 0,
        jars    => {},
        bg      => [],    # background requests { pid, file, step } and commands { cmd, step }
        vars    => {},    # captured by `sh ... as $NAME`
        sh_seq  => 0,
        ignore  => {},    # instance index => [[from, to], ...] log ranges with expected [emerg]
        timeout => _section($block, 'timeout') // $ENV{TEST_NGINX_TIMEOUT} // 10,
        workers => _section($block, 'workers') // 1,
        env     => $env,
    };
    note_v("=== $st->{name}");
    my $t0 = Time::HiRes::time();
    my $err;
    eval { _run_block($st); 1 } or $err = $@ || 'unknown error';
    # Whatever happened: join background requests and commands, stop everything.
    if (!$err) {
        eval { _join_bg($st, 1); 1 } or $err = $@ || 'unknown error';
    }
    for my $job (splice @{ $st->{bg} }) {    # only left after an error
        if ($job->{cmd}) {
            $job->{cmd}->kill_group('block aborted');
            delete $LIVE{ 'sh:' . $job->{cmd}->pid };
            next;
        }
        waitpid($job->{pid}, 0);
        unlink $job->{file};
    }
    my $stop_err = '';
    eval { _stop_all($st); 1 } or $stop_err = $@;
    if ($err) {
        _fail_rest($st, "block aborted: $err");
    } elsif ($stop_err) {
        _fail_rest($st, "stopping servers failed: $stop_err");
    } else {
        eval { _check_logs($st) if !$plan->{must_fail}; 1 } or _fail_rest($st, "log checks died: $@");
    }
    _fail_rest($st, "harness bug: fewer tests than planned") if $st->{emitted} < $plan->{count};
    # (more than planned only after _fail_rest on a complete block: prove reports the plan mismatch)
    if ($st->{emitted} > $plan->{count}) {
        $TB->diag("harness bug: block '$st->{name}' emitted $st->{emitted} tests, planned $plan->{count}");
    }
    if (!$ENV{TEST_NGINX_NO_CLEAN} && $st->{base}) {
        File::Path::remove_tree($st->{base});
        rmdir File::Basename::dirname($st->{base});    # only when empty
    }
    note_v(sprintf("=== %s done in %.2fs", $st->{name}, Time::HiRes::time() - $t0));
}

# One test. Extra diagnostics only on failure.
sub _ok {
    my ($st, $pass, $what, $diag) = @_;
    $st->{emitted}++;
    my $ok = $TB->ok($pass ? 1 : 0, "$st->{name} :: $what");
    $TB->diag($diag) if !$ok && defined $diag && length $diag;
    return $ok;
}

# First remaining test fails with $why, the rest are skipped.
sub _fail_rest {
    my ($st, $why) = @_;
    my $left = $st->{plan}{count} - $st->{emitted};
    # Even with every planned test already reported, an error must fail the
    # file: the extra test breaks the plan, which prove reports.
    _ok($st, 0, "block did not complete", $why);
    for (2 .. $left) {
        $st->{emitted}++;
        $TB->skip("$st->{name}: skipped after an earlier failure");
    }
}

sub _script_name {
    my $s = File::Basename::basename($0);
    $s =~ s/\.t$//;
    $s =~ s/[^\w.-]/_/g;
    return $s || 'test';
}

sub _run_block {
    my ($st) = @_;
    my $block = $st->{block};
    my $plan = $st->{plan};
    my $seq = $block->seq_num // 0;
    # The pid keeps two runs of the same file (two developers, prove -j) apart.
    my $base = "$SERVROOT_BASE/" . _script_name() . ".$$/$seq";
    $st->{base} = $base;

    # Ports for every instance, and redis.
    # Rule suites name their zone's store as $TEST_NGINX_STORE: empty for the shared-memory
    # store, or (TEST_NGINX_USE_REDIS=1) a Redis store on a redis-server started for the block.
    my $wants_store = grep { defined && /\$\{?TEST_NGINX_STORE\b/ }
                      map { _section($block, $_) } qw(http_config config main_config);
    my $store_redis = $wants_store && $ENV{TEST_NGINX_USE_REDIS};
    my $redis_port = (_bool_section($block, 'redis') || $store_redis)
                   ? SmartLimit::Test::Server::free_port() : '';
    my $store = $store_redis ? "store=redis redis=127.0.0.1:$redis_port" : '';
    my @inst;
    for my $i (1 .. $plan->{instances}) {
        my $root = $i == 1 ? "$base/n1" : "$base/n$i";
        push @inst, SmartLimit::Test::Server->new(
            index    => $i,
            servroot => $root,
            binary   => $st->{env}{binary},
            module   => $st->{env}{module},
            vars     => {
                TEST_NGINX_PORT       => SmartLimit::Test::Server::free_port(),
                TEST_NGINX_PORT2      => SmartLimit::Test::Server::free_port(),
                TEST_NGINX_SERVROOT   => $root,
                TEST_NGINX_HTML_DIR   => "$root/html",
                TEST_NGINX_REDIS_PORT => $redis_port,
                TEST_NGINX_INSTANCE   => $i,
                TEST_NGINX_STORE      => $store,
            },
        );
    }
    # Every instance's port, in every instance (a tool run by `sh` that talks to all nodes):
    # $TEST_NGINX_PORT_N1, $TEST_NGINX_PORT_N2, ... and $TEST_NGINX_PORTS ("p1,p2,...").
    my @ports = map { $_->{vars}{TEST_NGINX_PORT} } @inst;
    for my $n (@inst) {
        $n->{vars}{"TEST_NGINX_PORT_N$_"} = $ports[$_ - 1] for 1 .. @ports;
        $n->{vars}{TEST_NGINX_PORTS} = join ',', @ports;
    }
    $st->{instances} = \@inst;
    File::Path::remove_tree($base) if -e $base;

    for my $n (@inst) {
        $n->prepare;
        $n->write_user_files(_section($block, 'user_files'));
        $st->{current}{ $n->{index} } = {
            main_config => _section($block, 'main_config') // '',
            http_config => _section($block, 'http_config') // '',
            config      => _section($block, 'config') // '',
        };
        $n->write_config(_config_sections($st, $n));
    }

    if ($plan->{must_fail}) {
        my ($ok, $out) = $inst[0]->test_config;
        _ok($st, !$ok, "nginx -t refuses the config",
            "nginx -t accepted a config that must fail:\n$out");
        for my $re (@{ $plan->{error_log} }) {
            my $rx = _log_regex($re);
            _ok($st, scalar($out =~ $rx), "nginx -t output matches /$re/", "nginx -t said:\n$out");
        }
        return;
    }

    if (length $redis_port) {
        my $args = [ map { SmartLimit::Test::Server::subst($inst[0], $_) }
                     SmartLimit::Test::Steps::_shell_words(_section($block, 'redis') // '') ];
        my $r = SmartLimit::Test::Redis->new(port => $redis_port, dir => "$base/redis", args => $args);
        $st->{redis} = $r;
        $st->{redis_dir} = "$base/redis";
        $LIVE{redis} = $r;
        my ($ok, $msg) = $r->start;
        die $msg unless $ok;
    }

    for my $n (@inst) {
        next if $plan->{later}{ $n->{index} };
        $LIVE{"nginx:$n->{index}"} = $n;
        # With master_process off, the one process serves: no worker to wait for.
        my ($ok, $msg) = $n->start($plan->{master} eq 'off' ? 0 : $st->{workers});
        die $msg unless $ok;
    }

    for my $step (@{ $plan->{steps} }) {
        note_v("step: $step->{line}");
        my $run = $step->{vars} ? _resolve_vars($st, $step) : $step;
        next unless $run;
        my $sub = __PACKAGE__->can('_step_' . ($run->{type} =~ tr/-/_/r))
            or die "no runner for step type $run->{type}";
        $sub->($st, $run);
    }
}

# A step that uses variables captured by `sh ... as $NAME`: parsed again with
# their values. When one is not set (the capturing step failed) or the line
# does not parse with the values, the step fails (a step that is no test
# aborts the block). Returns the step to run, or undef.
sub _resolve_vars {
    my ($st, $step) = @_;
    my @unset = grep { !defined $st->{vars}{$_} } @{ $step->{vars} };
    my $err;
    if (@unset) {
        $err = join(', ', map { "\$$_" } @unset) . (@unset == 1 ? ' is' : ' are')
             . " not set (the step that captures it failed or did not run yet)";
    } else {
        my $line = SmartLimit::Test::Steps::substitute_vars($step->{line}, $st->{vars});
        note_v("  with values: $line");
        my $new = eval { SmartLimit::Test::Steps::parse_step($line, $st->{plan}{ctx}) };
        if ($new && $new->{tests} == $step->{tests}) {
            $new->{line} = $step->{line};    # the test name stays the line as written
            return $new;
        }
        ($err = $@ || "changes the kind of step") =~ s/ at \S+ line \d+.*//s;
        chomp $err;
        $err = "with the values of its variables: $line\n$err";
    }
    die "$step->{line}: $err\n" unless $step->{tests};
    _ok($st, 0, $step->{line}, $err);
    return undef;
}

# The sections an instance runs with; @swap (section names like config2,
# http_config_b) replace the config, http_config or main_config they start with.
sub _config_sections {
    my ($st, $n, @swap) = @_;
    my $b = $st->{block};
    my %cur = %{ $st->{current}{ $n->{index} } };
    for my $sec (@swap) {
        my ($kind) = $sec =~ /^(main_config|http_config|config)/;
        $cur{$kind} = _section($b, $sec) // '';
    }
    return {
        %cur,
        workers   => $st->{workers},
        master    => $st->{plan}{master},
        log_level => _section($b, 'log_level') // 'debug',
    };
}

sub _stop_all {
    my ($st) = @_;
    for my $n (@{ $st->{instances} || [] }) {
        $n->stop;
        delete $LIVE{"nginx:$n->{index}"};
    }
    if ($st->{redis}) {
        $st->{redis}->stop;
        delete $LIVE{redis};
    }
}

sub _check_logs {
    my ($st) = @_;
    my $plan = $st->{plan};
    my @inst = @{ $st->{instances} };
    my %log = map { ($_->{index} => $_->error_log) } @inst;
    unless (_bool_section($st->{block}, 'no_check_error_log')) {
        my @bad;
        for my $n (@inst) {
            my $text = $log{ $n->{index} };
            my $pos = 0;
            for my $line (split /^/, $text) {
                my $at = $pos;
                $pos += length $line;
                next unless $line =~ /\[(?:alert|emerg|crit)\]|exited on signal/;
                next if $line =~ /\[emerg\]/
                    && grep { $at >= $_->[0] && $at < $_->[1] } @{ $st->{ignore}{ $n->{index} } || [] };
                chomp $line;
                push @bad, "nginx #$n->{index}: $line";
            }
        }
        _ok($st, !@bad, "error.log has no [alert], [emerg], [crit] or crashed worker",
            join("\n", @bad));
    }
    my $all = join "\n", map { $log{$_} } sort keys %log;
    for my $re (@{ $plan->{error_log} }) {
        my $rx = _log_regex($re);
        _ok($st, scalar($all =~ $rx), "error.log matches /$re/",
            "not found in error.log\n" . join('', map { $_->log_tail(15) } @inst));
    }
    for my $re (@{ $plan->{no_error_log} }) {
        my $rx = _log_regex($re);
        my ($hit) = grep { $_ =~ $rx } split /\n/, $all;
        _ok($st, !defined $hit, "error.log does not match /$re/", "found: " . ($hit // ''));
    }
}

# ------------------------------------------------------------------ requests

sub _jar {
    my ($st, $client) = @_;
    return $st->{jars}{$client} ||= SmartLimit::Test::Jar->new;
}

# Header list for a request: the step's headers plus the client's cookies
# (after the jar's prepend, if any). The Cookie header of a jar with a
# prepend is [Cookie, "PREPEND; jar cookies", PREPEND]: _next_cookie keeps
# PREPEND in front on redirects.
sub _headers_for {
    my ($st, $req, $client) = @_;
    my @h = map { [$_->[0], $st->{instances}[0]->subst($_->[1])] } @{ $req->{headers} };
    unless (grep { lc $_->[0] eq 'cookie' } @h) {
        my $jar = _jar($st, $client);
        my $c = $jar->cookie_header;
        my $p = $jar->prepend;
        if (defined $p) {
            push @h, ['Cookie', defined $c ? "$p; $c" : $p, $p];
        } elsif (defined $c) {
            push @h, ['Cookie', $c];
        }
    }
    return \@h;
}

# One HTTP exchange with the step's instance. %hop (method, path, body) is
# used for a redirect's next hop instead of the step's own request line.
sub _send {
    my ($st, $req, $headers, %hop) = @_;
    my $n = $st->{instances}[ $req->{instance} - 1 ];
    return SmartLimit::Test::HTTP::request(
        port    => $n->port,
        method  => $hop{method} // $req->{method},
        path    => $hop{path} // $st->{instances}[0]->subst($req->{path}),
        headers => $headers,
        body    => exists $hop{method} ? $hop{body} : $req->{body},
        timeout => $st->{timeout},
        local_addr => $req->{from},    # every hop from the step's source address
    );
}

my $MAX_REDIRECTS = 5;

# The path (and query) a Location header leads to on the same instance:
# "/path?q" as it is, "http://any-host:port/path?q" (https, "//host/path"
# too) without scheme, host and port. undef when it is neither (a relative
# "foo/bar", another scheme): such a redirect is not followed.
sub _redirect_target {
    my ($loc) = @_;
    return undef unless defined $loc;
    $loc =~ s/#.*//s;
    return $loc if $loc =~ m{^/(?!/)};
    if ($loc =~ m{^(?:https?:)?//[^/?#]*(.*)$}si) {
        my $p = $1;
        return $p =~ m{^/} ? $p : "/$p";
    }
    return undef;
}

# The Cookie header a browser sends on the next hop: the cookies of this
# hop's Cookie header(s) updated by its response's Set-Cookie headers (the
# jar's rules: Max-Age<=0 or a past Expires deletes), after the jar's prepend
# when there is one (see _headers_for). Returns the header entry, or undef
# when no cookie is left.
sub _next_cookie {
    my ($headers, $res) = @_;
    my ($prepend, @sent);
    for my $h (grep { lc $_->[0] eq 'cookie' } @$headers) {
        my $v = $h->[1];
        if (defined $h->[2]) {
            $prepend = $h->[2];
            $v = substr($v, length $prepend);
            $v =~ s/^;\s*//;
        }
        push @sent, $v if length $v;
    }
    my $jar = SmartLimit::Test::Jar->from_header(join '; ', @sent);
    $jar->absorb($res);
    my $c = $jar->cookie_header;
    return defined $c ? ['Cookie', "$prepend; $c", $prepend] : ['Cookie', $prepend, $prepend]
        if defined $prepend;
    return defined $c ? ['Cookie', $c] : undef;
}

# A request like a browser sends it: redirects (301, 302, 303, 307, 308 with
# a usable Location) are followed on the same instance, at most
# $MAX_REDIRECTS hops, unless the block has `--- follow_redirects: 0`.
# Returns the final response with `redirects` (hops followed), `chain` (one
# { method, path, status, location } per hop followed) and the Set-Cookie
# headers of the earlier hops in front of its own; `elapsed` covers the chain.
sub _send_chain {
    my ($st, $req, $headers) = @_;
    my $t0 = Time::HiRes::time();
    my ($method, $path, $body) = ($req->{method}, $st->{instances}[0]->subst($req->{path}), $req->{body});
    my @h = @$headers;
    my $res = _send($st, $req, \@h);
    my (@chain, @cookies);
    while ($st->{plan}{follow} && $res->{status} =~ /^30[12378]$/) {
        my $loc = SmartLimit::Test::HTTP::header($res, 'Location');
        my $next = _redirect_target($loc);
        if (!defined $next) {
            $res->{redirect_note} = defined $loc
                ? "$res->{status} not followed: Location '$loc' is neither a path nor an http URL"
                : "$res->{status} not followed: no Location header";
            last;
        }
        if (@chain >= $MAX_REDIRECTS) {
            $res->{redirect_note} = "stopped after $MAX_REDIRECTS redirects: $res->{status} to $loc not followed";
            last;
        }
        push @chain, { method => $method, path => $path, status => $res->{status}, location => $loc };
        push @cookies, grep { lc $_->[0] eq 'set-cookie' } @{ $res->{headers} };
        my $cookie = _next_cookie(\@h, $res);
        if ($res->{status} =~ /^30[123]$/ && $method ne 'GET' && $method ne 'HEAD') {
            # 301/302/303: the browser comes back with a GET without a body.
            ($method, $body) = ('GET', undef);
            @h = grep { lc $_->[0] !~ /^(?:content-.*|transfer-encoding)$/ } @h;
        }
        @h = ((grep { lc $_->[0] ne 'cookie' } @h), defined $cookie ? ($cookie) : ());
        $path = $next;
        note_v(sprintf("  -> %s (%.3fs), redirect %d: %s %s", $res->{status}, $res->{elapsed},
                       scalar @chain, $method, $path));
        $res = _send($st, $req, \@h, method => $method, path => $path, body => $body);
    }
    $res->{redirects} = scalar @chain;
    if (@chain) {
        $res->{chain} = \@chain;
        # Every cookie received during the step, the final hop's last.
        my $hs = $res->{headers};
        my ($at) = grep { lc $hs->[$_][0] eq 'set-cookie' } 0 .. $#$hs;
        splice @$hs, $at // scalar(@$hs), 0, @cookies;
        $res->{elapsed} = Time::HiRes::time() - $t0;
    }
    return $res;
}

# The redirects a response went through, for failure messages ('' when none).
sub _chain_diag {
    my ($res) = @_;
    my $s = '';
    my @chain = @{ $res->{chain} || [] };
    if (@chain) {
        $s .= "followed " . @chain . " redirect" . (@chain == 1 ? '' : 's')
            . " (below: the last response, with the Set-Cookie headers of every hop):\n";
        my $i = 0;
        $s .= sprintf("  %d. %s %s => %s, Location: %s\n", ++$i, @$_{qw(method path status location)})
            for @chain;
    }
    $s .= "$res->{redirect_note}\n" if $res->{redirect_note};
    return $s;
}

# Evaluates the status and the checks; returns the list of failure messages.
# $skip: hash of check kinds not to evaluate per response (parallel).
sub _evaluate {
    my ($req, $res, $skip) = @_;
    my @fail;
    my $status = $res->{status};
    push @fail, "status $status, expected $req->{status}{text}"
        . ($res->{error} ? " ($res->{error})" : '')
        unless $status =~ $req->{status}{re};
    my ($json, $json_err);
    for my $c (@{ $req->{checks} }) {
        next if $skip && $skip->{ $c->{what} };
        my $m = _check($c, $res, \$json, \$json_err);
        push @fail, "check '$c->{text}' failed: $m" if defined $m;
    }
    return @fail;
}

sub _match {
    my ($op, $re, $value) = @_;
    my $hit = defined $value && $value =~ $re;
    return $op eq '=~' ? $hit : !$hit;
}

# undef when the check passes, else a message.
sub _check {
    my ($c, $res, $json_ref, $json_err_ref) = @_;
    my $w = $c->{what};
    if ($w eq 'body') {
        return undef if _match($c->{op}, $c->{re}, $res->{body});
        return "body " . ($c->{op} eq '=~' ? 'does not match' : 'matches');
    }
    if ($w eq 'header') {
        my @v = SmartLimit::Test::HTTP::header_values($res, $c->{name});
        if ($c->{op} eq 'absent') {
            return @v ? "header $c->{name} is present: @v" : undef;
        }
        if ($c->{op} eq 'present') {
            return @v ? undef : "header $c->{name} is absent";
        }
        if ($c->{op} eq '=~') {
            return "header $c->{name} is absent" unless @v;
            return (grep { $_ =~ $c->{re} } @v) ? undef : "header $c->{name}: " . join(' | ', @v);
        }
        my @hit = grep { $_ =~ $c->{re} } @v;
        return @hit ? "header $c->{name}: @hit" : undef;
    }
    if ($w eq 'json') {
        unless (defined $$json_ref || defined $$json_err_ref) {
            $$json_ref = eval { JSON::PP->new->utf8->allow_nonref->decode($res->{body}) };
            $$json_err_ref = $@ || undef;
            $$json_err_ref = "empty body" if !defined $$json_ref && !$$json_err_ref;
        }
        return "body is not JSON: $$json_err_ref" if $$json_err_ref;
        my ($exists, $v) = _json_get($$json_ref, $c->{path});
        my $p = join '.', 'json', @{ $c->{path} };
        if ($c->{op} eq 'absent')  { return $exists ? "$p exists: " . _show($v) : undef }
        if ($c->{op} eq 'present') { return $exists ? undef : "$p does not exist" }
        return "$p does not exist" unless $exists;
        if ($c->{op} eq '=~' || $c->{op} eq '!~') {
            return "$p is not a scalar: " . _show($v) if ref $v && !JSON::PP::is_bool($v);
            return _match($c->{op}, $c->{re}, $v) ? undef : "$p is " . _show($v);
        }
        my $e = $c->{value};
        my $eq;
        if ($e->{type} eq 'num') {
            return "$p is not a number: " . _show($v)
                if ref $v || !defined $v || !Scalar::Util::looks_like_number($v);
            return _compare($v, $c->{op}, $e->{v}) ? undef : "$p is " . _show($v);
        } elsif ($e->{type} eq 'str') {
            $eq = defined $v && !ref $v && $v eq $e->{v};
        } elsif ($e->{type} eq 'null') {
            $eq = !defined $v;
        } else {
            $eq = JSON::PP::is_bool($v) && (($v ? 'true' : 'false') eq $e->{type});
        }
        $eq = !$eq if $c->{op} eq '!=';
        return $eq ? undef : "$p is " . _show($v);
    }
    if ($w eq 'cookie') {
        my @set = grep { $_->{name} eq $c->{name} } SmartLimit::Test::HTTP::set_cookies($res);
        my $last = $set[-1];
        if ($c->{op} eq 'set') {
            return "no Set-Cookie for $c->{name}" unless $last;
            return "Set-Cookie deletes $c->{name}: $last->{raw}" if $last->{deleted};
            return "Set-Cookie for $c->{name} has an empty value" unless length $last->{value};
            return undef;
        }
        if ($c->{op} eq 'absent') {
            return $last ? "response sets $c->{name}: $last->{raw}" : undef;
        }
        if ($c->{op} eq 'deleted') {
            return "no Set-Cookie for $c->{name}" unless $last;
            return $last->{deleted} ? undef : "Set-Cookie does not delete $c->{name}: $last->{raw}";
        }
        return "no Set-Cookie for $c->{name}" if !$last && $c->{op} eq '=~';
        return _match($c->{op}, $c->{re}, $last ? $last->{value} : undef)
            ? undef : "cookie $c->{name} = " . ($last ? $last->{value} : '(not set)');
    }
    if ($w eq 'redirects') {
        my $got = $res->{redirects} // 0;
        return _compare($got, $c->{op}, $c->{v}) ? undef
            : "followed $got redirect" . ($got == 1 ? '' : 's');
    }
    if ($w eq 'elapsed') {
        my $e = $res->{elapsed};
        my $r = $c->{op} eq '<' ? $e < $c->{v} : $e > $c->{v};
        return $r ? undef : sprintf("elapsed %.3fs", $e);
    }
    return "unknown check kind $w";
}

sub _compare {
    my ($x, $op, $y) = @_;
    return $op eq '==' ? $x == $y : $op eq '!=' ? $x != $y : $op eq '<' ? $x < $y
         : $op eq '>'  ? $x >  $y : $op eq '<=' ? $x <= $y : $x >= $y;
}

sub _show {
    my ($v) = @_;
    return 'null' unless defined $v;
    return JSON::PP->new->canonical->allow_nonref->encode($v) if ref $v;
    return Scalar::Util::looks_like_number($v) ? $v : "\"$v\"";
}

sub _json_get {
    my ($doc, $path) = @_;
    my $cur = $doc;
    for my $k (@$path) {
        if (ref $cur eq 'HASH') {
            return (0) unless exists $cur->{$k};
            $cur = $cur->{$k};
        } elsif (ref $cur eq 'ARRAY' && $k =~ /^\d+$/) {
            return (0) unless $k < @$cur;
            $cur = $cur->[$k];
        } else {
            return (0);
        }
    }
    return (1, $cur);
}

sub _failure_diag {
    my ($st, $req, $res, @fail) = @_;
    my $n = $st->{instances}[ $req->{instance} - 1 ];
    return join('', map { "  $_\n" } @fail)
        . _chain_diag($res)
        . SmartLimit::Test::HTTP::dump_response($res, 500)
        . $n->log_tail(10);
}

# One request of a client (redirects followed), with its jar updated from the response.
sub _do_request {
    my ($st, $req) = @_;
    my $res = _send_chain($st, $req, _headers_for($st, $req, $req->{client}));
    _jar($st, $req->{client})->absorb($res);
    note_v(sprintf("  -> %s (%.3fs)", $res->{status}, $res->{elapsed}));
    return $res;
}

sub _step_request {
    my ($st, $step) = @_;
    my $res = _do_request($st, $step->{req});
    my @fail = _evaluate($step->{req}, $res);
    _ok($st, !@fail, $step->{line}, @fail ? _failure_diag($st, $step->{req}, $res, @fail) : undef);
}

sub _step_repeat {
    my ($st, $step) = @_;
    for my $i (1 .. $step->{n}) {
        my $res = _do_request($st, $step->{req});
        my @fail = _evaluate($step->{req}, $res);
        if (@fail) {
            return _ok($st, 0, $step->{line},
                "iteration $i of $step->{n}:\n" . _failure_diag($st, $step->{req}, $res, @fail));
        }
    }
    _ok($st, 1, $step->{line});
}

sub _step_until {
    my ($st, $step) = @_;
    my $deadline = Time::HiRes::time() + $step->{seconds};
    my ($tries, $res, @fail) = (0);
    while (1) {
        $tries++;
        $res = _do_request($st, $step->{req});
        @fail = _evaluate($step->{req}, $res);
        last if !@fail || Time::HiRes::time() >= $deadline;
        Time::HiRes::sleep(0.1);
    }
    _ok($st, !@fail, $step->{line}, @fail
        ? "still failing after $tries tries in $step->{seconds}s; last response:\n"
          . _failure_diag($st, $step->{req}, $res, @fail)
        : undef);
}

# Forks a child that runs the request and stores the response in a file.
sub _fork_request {
    my ($st, $req, $headers, $barrier_r, $barrier_w) = @_;
    my ($fh, $file) = File::Temp::tempfile('sl-res-XXXXXX', TMPDIR => 1, UNLINK => 0);
    close $fh;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        my $res = eval {
            if ($barrier_r) {
                close $barrier_w;
                my $x;
                sysread($barrier_r, $x, 1);    # EOF when the parent releases everyone
            }
            _send_chain($st, $req, $headers);
        } || { status => 599, error => "child died: $@", headers => [], body => '', elapsed => 0,
               redirects => 0 };
        Storable::nstore($res, $file);
        POSIX::_exit(0);
    }
    return { pid => $pid, file => $file };
}

sub _collect {
    my ($job) = @_;
    waitpid($job->{pid}, 0);
    my $res = eval { Storable::retrieve($job->{file}) }
        || { status => 599, error => "request child left no result", headers => [], body => '',
             elapsed => 0, redirects => 0 };
    unlink $job->{file};
    return $res;
}

sub _step_bg {
    my ($st, $step) = @_;
    my $req = $step->{req};
    my $job = _fork_request($st, $req, _headers_for($st, $req, $req->{client}));
    push @{ $st->{bg} }, { %$job, step => $step };
}

# Reports every background request and command, in the order they started.
# $at_end (the block's steps are over): a command still running is killed
# and fails.
sub _join_bg {
    my ($st, $at_end) = @_;
    if ($at_end) {
        for my $job (grep { $_->{cmd} } @{ $st->{bg} }) {
            $job->{cmd}->kill_group('still running at the end of the block (wait for it with wait-bg)')
                if $job->{cmd}->running;
        }
    }
    while (my $job = shift @{ $st->{bg} }) {
        if ($job->{cmd}) {
            $job->{cmd}->wait_done;
            delete $LIVE{ 'sh:' . $job->{cmd}->pid };
            _report_cmd($st, $job->{step}, $job->{cmd});
            next;
        }
        my $res = _collect($job);
        my $req = $job->{step}{req};
        _jar($st, $req->{client})->absorb($res);
        my @fail = _evaluate($req, $res);
        _ok($st, !@fail, $job->{step}{line}, @fail ? _failure_diag($st, $req, $res, @fail) : undef);
    }
}

sub _step_wait_bg { _join_bg($_[0], 0) }

sub _step_parallel {
    my ($st, $step) = @_;
    my $req = $step->{req};
    my $prefix = $req->{client};
    pipe(my $br, my $bw) or die "pipe: $!";
    my @jobs;
    for my $i (1 .. $step->{n}) {
        my $client = "$prefix$i";
        push @jobs, { %{ _fork_request($st, $req, _headers_for($st, $req, $client), $br, $bw) },
                      client => $client };
    }
    close $br;
    my $t0 = Time::HiRes::time();
    close $bw;    # release the barrier: every child sends now
    my @res;
    for my $job (@jobs) {
        my $res = _collect($job);
        _jar($st, $job->{client})->absorb($res);
        push @res, [$job->{client}, $res];
    }
    my $wall = Time::HiRes::time() - $t0;

    my (@fail, %by_status);
    $by_status{ $_->[1]{status} }++ for @res;
    for my $r (@res) {
        my @f = _evaluate($req, $r->[1], { elapsed => 1, count => 1 });
        next unless @f;
        push @fail, "$r->[0]: " . join('; ', @f);
        if (!$st->{_dumped}++) {
            push @fail, "first failing response ($r->[0]):\n" . _chain_diag($r->[1])
                . SmartLimit::Test::HTTP::dump_response($r->[1], 500);
        }
    }
    delete $st->{_dumped};
    for my $c (grep { $_->{what} eq 'elapsed' } @{ $req->{checks} }) {
        my $r = $c->{op} eq '<' ? $wall < $c->{v} : $wall > $c->{v};
        push @fail, sprintf("check '%s' failed: the batch took %.3fs", $c->{text}, $wall) unless $r;
    }
    for my $c (grep { $_->{what} eq 'count' } @{ $req->{checks} }) {
        my $got = $by_status{ $c->{status} } // 0;
        push @fail, "check '$c->{text}' failed: $got responses with status $c->{status}"
            unless _compare($got, $c->{op}, $c->{v});
    }
    my $summary = sprintf("statuses: %s; batch %.3fs",
        join(', ', map { "$_ x$by_status{$_}" } sort keys %by_status), $wall);
    note_v("  -> $summary");
    _ok($st, !@fail, $step->{line}, @fail ? join("\n", @fail, $summary) : undef);
}

# ------------------------------------------------------------------ other steps

sub _step_sleep { Time::HiRes::sleep($_[1]{seconds}) }

sub _targets {
    my ($st, $step) = @_;
    my @i = @{ $st->{instances} };
    return defined $step->{instance} ? ($i[ $step->{instance} - 1 ]) : @i;
}

sub _step_reload {
    my ($st, $step) = @_;
    my @msg;
    for my $n (_targets($st, $step)) {
        my $conf = _config_sections($st, $n, @{ $step->{sections} || [] });
        $n->write_config($conf);
        my ($ok, $msg) = $n->reload($st->{workers});
        if ($ok) {
            $st->{current}{ $n->{index} }{$_} = $conf->{$_} for qw(main_config http_config config);
        } else {
            push @msg, "nginx #$n->{index}: $msg";
            $n->write_config(_config_sections($st, $n));    # what is really running
        }
    }
    _ok($st, !@msg, $step->{line}, join("\n", @msg));
}

sub _step_reload_expect_fail {
    my ($st, $step) = @_;
    my @msg;
    for my $n (_targets($st, $step)) {
        my $conf = "$n->{servroot}/conf/nginx.conf";
        my $saved = SmartLimit::Test::Server::slurp($conf);
        $n->write_config(_config_sections($st, $n, @{ $step->{sections} || [] }));
        my ($ok, $out) = $n->test_config;
        if ($ok) {
            push @msg, "nginx #$n->{index}: nginx -t accepted the config";
        } elsif ($step->{re} && $out !~ $step->{re}) {
            push @msg, "nginx #$n->{index}: nginx -t output does not match:\n$out";
        } else {
            my ($alive, $m, $range) = $n->reload_refused;
            push @{ $st->{ignore}{ $n->{index} } }, $range if $range;
            push @msg, "nginx #$n->{index}: $m" unless $alive;
        }
        # Back to the config that is really running.
        SmartLimit::Test::Server::spew($conf, $saved);
    }
    _ok($st, !@msg, $step->{line}, join("\n", @msg));
}

sub _step_kill_worker {
    my ($st, $step) = @_;
    for my $n (_targets($st, $step)) {
        my ($ok, $msg) = $n->kill_worker($step->{signal}, $st->{workers});
        die "kill-worker: $msg\n" unless $ok;
    }
}

sub _step_nginx_stop {
    my ($st, $step) = @_;
    my ($n) = _targets($st, $step);
    $n->stop;
    _ok($st, !$n->running, $step->{line}, "nginx #$n->{index} still runs");
}

sub _step_nginx_start {
    my ($st, $step) = @_;
    my ($n) = _targets($st, $step);
    my ($ok, $msg) = $n->running ? (0, "nginx #$n->{index} runs already") : $n->start($st->{workers});
    $LIVE{"nginx:$n->{index}"} = $n if $ok;
    _ok($st, $ok, $step->{line}, $msg);
}

sub _step_nginx_upgrade {
    my ($st, $step) = @_;
    my ($n) = _targets($st, $step);
    my ($ok, $msg) = $n->upgrade($st->{workers});
    _ok($st, $ok, $step->{line}, $msg);
}

sub _step_jar {
    my ($st, $step) = @_;
    my $jar = _jar($st, $step->{client});
    my $op = $step->{op};
    if ($op eq 'set') {
        $jar->set($step->{name}, $st->{instances}[0]->subst($step->{value}));
    } elsif ($op eq 'prepend') {
        $jar->prepend("$step->{name}=" . $st->{instances}[0]->subst($step->{value}));
    } elsif ($op eq 'delete') {
        $jar->delete($step->{name});
    } elsif ($op eq 'clear') {
        $jar->clear;
    } elsif ($op eq 'copy') {
        _jar($st, $step->{to})->copy_from($jar);
    } elsif ($op eq 'rename') {
        # The cookie's value moves to another name (a ticket of one room shown to another).
        my $v = $jar->get($step->{name});
        die "jar $step->{client} has no cookie '$step->{name}' to rename\n" unless defined $v;
        $jar->delete($step->{name});
        $jar->set($step->{to_name}, $v);
    } elsif ($op eq 'tamper') {
        my $v = $jar->get($step->{name});
        die "jar $step->{client} has no cookie '$step->{name}' to tamper with\n"
            unless defined $v && length $v;
        my $i = int(length($v) / 2);
        my $ch = substr($v, $i, 1);
        # Stay inside the base64url alphabet so only the content is wrong.
        my $new = $ch eq 'A' ? 'B' : 'A';
        substr($v, $i, 1) = $new;
        $jar->set($step->{name}, $v);
    }
}

sub _step_redis_stop {
    my ($st, $step) = @_;
    my ($ok, $msg) = $st->{redis}->stop;
    _ok($st, $ok && !$st->{redis}->ping, $step->{line}, $msg);
}

sub _step_redis_start {
    my ($st, $step) = @_;
    my ($ok, $msg) = $st->{redis}->start;
    $LIVE{redis} = $st->{redis};
    _ok($st, $ok, $step->{line}, $msg);
}

sub _step_redis {
    my ($st, $step) = @_;
    my @args = map { $st->{instances}[0]->subst($_) } @{ $step->{args} };
    my ($rc, $out) = $st->{redis}->cli(@args);
    my $pass = $rc == 0 && (!$step->{re} || $out =~ $step->{re});
    _ok($st, $pass, $step->{line}, "redis-cli exit $rc, output:\n$out");
}

# ------------------------------------------------------------------ shell commands

# Starts an sh / bg-sh step's command (TEST_NGINX_* substituted, and in its
# environment: instance 1's values).
sub _start_cmd {
    my ($st, $step) = @_;
    my $n1 = $st->{instances}[0];
    my $command = $n1->subst($step->{command});
    my $dir = "$st->{base}/sh";
    File::Path::make_path($dir);
    my $seq = ++$st->{sh_seq};
    my $cmd = SmartLimit::Test::Shell->start(
        command => $command,
        out     => "$dir/$seq.out",
        timeout => $step->{timeout},
        env     => { %{ $n1->{vars} } },
    );
    $LIVE{ 'sh:' . $cmd->pid } = $cmd;
    note_v("  sh pid " . $cmd->pid . ": $command");
    return $cmd;
}

# The one test of an sh / bg-sh step: exit 0, output matching, capture.
sub _report_cmd {
    my ($st, $step, $cmd) = @_;
    my @fail;
    my $why = $cmd->failure;
    push @fail, $why if defined $why;
    my $out = $cmd->output;
    my $got;
    if ($step->{re}) {
        if ($out =~ $step->{re}) {
            $got = $1;
        } else {
            push @fail, "output does not match $step->{re_text}";
        }
    }
    if (my $name = $step->{capture}) {
        delete $st->{vars}{$name};
        if (@fail) {
            push @fail, "\$$name is not set";
        } elsif (!defined $got) {
            push @fail, "the capture group of $step->{re_text} matched nothing: \$$name is not set";
        } elsif ($got !~ /^-?\d+(?:\.\d+)?$/) {
            push @fail, "captured '$got', not a number: \$$name is not set";
        } else {
            $st->{vars}{$name} = $got;
            note_v("  \$$name = $got");
        }
    }
    note_v(sprintf("  -> sh %s (%.3fs)", $why // 'exit 0', $cmd->{elapsed} // 0));
    my $diag;
    if (@fail) {
        my @lines = split /^/, $out;
        my $shown = @lines > 40 ? join('', @lines[-40 .. -1]) : $out;
        $shown = '...' . substr($shown, -4000) if length $shown > 4000;
        $shown =~ s/^/| /mg;
        $shown .= "\n" if length $shown && $shown !~ /\n\z/;
        $shown = '' unless length $out;
        $diag = join('', map { "  $_\n" } @fail)
            . "command: " . $st->{instances}[0]->subst($step->{command}) . "\n"
            . sprintf("%s %.3fs; output: %d bytes%s\n",
                      $step->{type} eq 'bg-sh' ? 'reaped after' : 'ran', $cmd->{elapsed} // 0, length $out,
                      @lines > 40 || length $out > 4000 ? ' (the end below)' : '')
            . $shown;
    }
    _ok($st, !@fail, $step->{line}, $diag);
}

sub _step_sh {
    my ($st, $step) = @_;
    my $cmd = _start_cmd($st, $step);
    $cmd->wait_done;
    delete $LIVE{ 'sh:' . $cmd->pid };
    _report_cmd($st, $step, $cmd);
}

sub _step_bg_sh {
    my ($st, $step) = @_;
    push @{ $st->{bg} }, { cmd => _start_cmd($st, $step), step => $step };
}

1;
