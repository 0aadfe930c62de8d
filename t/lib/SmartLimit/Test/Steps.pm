package SmartLimit::Test::Steps;

# Parser for the `--- steps` language (see t/README.md). Parsing happens
# before any server starts, so a typo fails loudly instead of running a
# different test than the one written.

use strict;
use warnings;

my $RE_TOKEN  = qr{/((?:\\.|[^\\/])*)/([imsx]*)};
my $STR_TOKEN = qr{"((?:\\.|[^\\"])*)"};
my $NUM_TOKEN = qr{(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)};
my $CMP       = qr{(==|!=|<=|>=|<|>)};
my $CLIENT    = qr{[A-Za-z_][\w.-]*};
my $HNAME     = qr{[!#\$%&'*+.^_`|~0-9A-Za-z-]+};

my %RESERVED = map { ($_ => 1) } qw(repeat until parallel bg wait-bg sleep reload reload-with
    reload-expect-fail jar redis redis-stop redis-start kill-worker);

sub _regex {
    my ($pat, $flags) = @_;
    my $re = eval { length $flags ? qr/(?$flags)$pat/ : qr/$pat/ };
    die "bad regex /$pat/: $@" unless $re;
    return $re;
}

sub _unquote {
    my ($s) = @_;
    $s =~ s/\\(.)/$1 eq 'n' ? "\n" : $1 eq 't' ? "\t" : $1 eq 'r' ? "\r" : $1/ge;
    return $s;
}

# A status matcher: 200, 200|503, 5xx, or /regex/.
sub _status_matcher {
    my ($tok) = @_;
    my $re;
    if ($tok =~ m{^$RE_TOKEN$}) {
        $re = _regex($1, $2);
    } elsif ($tok =~ /^[0-9x|]+$/ && $tok =~ /\d|x/) {
        (my $p = $tok) =~ s/x/\\d/g;
        $re = _regex("^(?:$p)\$", '');
    } else {
        die "bad status '$tok' (want 200, 200|503, 5xx or /regex/)";
    }
    return { text => $tok, re => $re };
}

# Parses "; check; check" after the status. Returns a list of checks.
sub _parse_checks {
    my ($s, $kind) = @_;
    my @checks;
    pos($s) = 0;
    while (1) {
        last if $s =~ /\G\s*\z/gc;
        $s =~ /\G\s*;\s*/gc or die "expected ';' before: " . substr($s, pos($s) // 0);
        my $start = pos($s);
        my $c;
        if ($s =~ /\Gbody\s+(=~|!~)\s+$RE_TOKEN/gc) {
            $c = { what => 'body', op => $1, re => _regex($2, $3) };
        } elsif ($s =~ /\Gheader\s+($HNAME)\s+(=~|!~)\s+$RE_TOKEN/gc) {
            $c = { what => 'header', name => $1, op => $2, re => _regex($3, $4) };
        } elsif ($s =~ /\Gheader\s+($HNAME)\s+(absent|present)\b/gc) {
            $c = { what => 'header', name => $1, op => $2 };
        } elsif ($s =~ /\Gjson((?:\.[\w-]+)*)\s+(=~|!~)\s+$RE_TOKEN/gc) {
            $c = { what => 'json', path => _json_path($1), op => $2, re => _regex($3, $4) };
        } elsif ($s =~ /\Gjson((?:\.[\w-]+)*)\s+(absent|present)\b/gc) {
            $c = { what => 'json', path => _json_path($1), op => $2 };
        } elsif ($s =~ /\Gjson((?:\.[\w-]+)*)\s+$CMP\s+/gc) {
            my ($path, $op) = ($1, $2);
            my $v;
            if ($s =~ /\G$NUM_TOKEN/gc) {
                $v = { type => 'num', v => $1 };
            } elsif ($s =~ /\G$STR_TOKEN/gc) {
                $v = { type => 'str', v => _unquote($1) };
            } elsif ($s =~ /\G(true|false|null)\b/gc) {
                $v = { type => $1 };
            } else {
                die "bad JSON value after json$path $op (want a number, \"string\", true, false or null)";
            }
            die "json $op needs a number" if $op !~ /^(==|!=)$/ && $v->{type} ne 'num';
            $c = { what => 'json', path => _json_path($path), op => $op, value => $v };
        } elsif ($s =~ /\Gcookie\s+([^\s;=]+)\s+(set|absent|deleted)\b/gc) {
            $c = { what => 'cookie', name => $1, op => $2 };
        } elsif ($s =~ /\Gcookie\s+([^\s;=]+)\s+(=~|!~)\s+$RE_TOKEN/gc) {
            $c = { what => 'cookie', name => $1, op => $2, re => _regex($3, $4) };
        } elsif ($s =~ /\Gelapsed\s+(<|>)\s+$NUM_TOKEN/gc) {
            $c = { what => 'elapsed', op => $1, v => $2 };
        } elsif ($s =~ /\Gredirects\s+$CMP\s+(\d+)/gc) {
            $c = { what => 'redirects', op => $1, v => $2 };
        } elsif ($s =~ /\Gcount\s+(\d{3})\s+$CMP\s+(\d+)/gc) {
            die "'count' is only for parallel steps" unless $kind eq 'parallel';
            $c = { what => 'count', status => $1, op => $2, v => $3 };
        } else {
            die "unknown check: " . substr($s, $start);
        }
        $c->{text} = substr($s, $start, pos($s) - $start);
        push @checks, $c;
    }
    return @checks;
}

sub _json_path {
    my ($p) = @_;
    $p =~ s/^\.//;
    return [ length $p ? split(/\./, $p) : () ];
}

# "<client> <METHOD> <path>[ @N][ Header: value | Header: value] => <status>[; check]..."
sub parse_request {
    my ($line, $kind) = @_;
    $kind ||= 'request';
    my ($left, $right) = $line =~ /^(.*?)\s+=>\s+(.*)$/
        or die "missing ' => <status>'";
    my ($client, $method, $path, $rest) = $left =~ /^($CLIENT)\s+([A-Z]+)\s+(\S+)(.*)$/
        or die "want '<client> <METHOD> <path> ...' before '=>'";
    die "'$client' is a reserved word, not a client name" if $RESERVED{$client};
    my $instance = 1;
    $rest =~ s/^\s+|\s+$//g;
    if ($rest =~ s/^@(\d+)(?:\s+|$)//) {
        $instance = $1;
    } elsif ($rest =~ s/\s*(?<!\S)@(\d+)$//) {
        $instance = $1;
    }
    my @headers;
    if (length $rest) {
        for my $h (split /\s+\|\s+/, $rest) {
            $h =~ /^($HNAME):\s*(.*?)\s*$/ or die "bad header '$h' (want 'Name: value', several separated by ' | ')";
            push @headers, [$1, $2];
        }
    }
    my ($status_tok, $checks) = $right =~ /^(\S+?)(\s*;.*|\s*)$/
        or die "missing status after '=>'";
    my $status = _status_matcher($status_tok);
    my @checks = _parse_checks($checks, $kind);
    return {
        client => $client, method => $method, path => $path, instance => $instance,
        headers => \@headers, status => $status, checks => \@checks,
    };
}

# Parses a whole `--- steps` section. $ctx: { instances => N, redis => bool,
# sections => { name => 1 } }. Returns the list of steps; each has `line`,
# `type` and `tests` (how many Test::More tests it emits).
sub parse {
    my ($text, $ctx) = @_;
    my @steps;
    my $n = 0;
    for my $raw (split /\n/, $text // '') {
        $n++;
        (my $line = $raw) =~ s/^\s+|\s+$//g;
        next if $line eq '' || $line =~ /^#/;
        my $step = eval { _parse_line($line, $ctx) };
        unless ($step) {
            (my $e = $@) =~ s/ at \S+ line \d+.*//s;
            chomp $e;
            die "steps line $n: $e\n  in: $line\n";
        }
        $step->{line} = $line;
        my $inst = $step->{instance} // ($step->{req} ? $step->{req}{instance} : undef);
        if (defined $inst && ($inst < 1 || $inst > $ctx->{instances})) {
            die "steps line $n: instance \@$inst does not exist (--- instances: $ctx->{instances})\n  in: $line\n";
        }
        if ($step->{type} =~ /^redis/ && !$ctx->{redis}) {
            die "steps line $n: redis steps need a '--- redis' section\n  in: $line\n";
        }
        for my $sec (@{ $step->{sections} || [] }) {
            die "steps line $n: no section '--- $sec' in this block\n  in: $line\n"
                unless $ctx->{sections}{$sec};
            die "steps line $n: '$sec' is not a config section (config*, http_config*, main_config*)\n  in: $line\n"
                unless $sec =~ /^(?:main_config|http_config|config)\w*$/;
        }
        push @steps, $step;
    }
    return @steps;
}

sub _parse_line {
    my ($line, $ctx) = @_;
    if ($line =~ /^repeat\s+(\d+)\s*:\s*(.+)$/) {
        return { type => 'repeat', n => $1, req => parse_request($2), tests => 1 };
    }
    if ($line =~ /^until\s+(\d+(?:\.\d+)?)\s*:\s*(.+)$/) {
        return { type => 'until', seconds => $1, req => parse_request($2), tests => 1 };
    }
    if ($line =~ /^parallel\s+(\d+)\s+(.+)$/) {
        die "parallel needs N >= 1" unless $1 >= 1;
        return { type => 'parallel', n => $1, req => parse_request($2, 'parallel'), tests => 1 };
    }
    if ($line =~ /^bg\s+(.+)$/) {
        return { type => 'bg', req => parse_request($1), tests => 1 };
    }
    if ($line eq 'wait-bg') {
        return { type => 'wait-bg', tests => 0 };
    }
    if ($line =~ /^sleep\s+(\d*\.?\d+)$/) {
        return { type => 'sleep', seconds => $1, tests => 0 };
    }
    if ($line =~ /^reload(?:\s+@(\d+))?$/) {
        return { type => 'reload', instance => $1, tests => 1 };
    }
    if ($line =~ /^reload-with((?:\s+\w+)+)(?:\s+@(\d+))?$/) {
        return { type => 'reload', sections => [ split ' ', $1 ], instance => $2, tests => 1 };
    }
    if ($line =~ m{^reload-expect-fail((?:\s+\w+)*)(?:\s+@(\d+))?(?:\s+=>\s+$RE_TOKEN)?$}) {
        return { type => 'reload-expect-fail', sections => [ split ' ', $1 ], instance => $2,
                 re => (defined $3 ? _regex($3, $4) : undef), tests => 1 };
    }
    if ($line =~ /^kill-worker(?:\s+(?:SIG)?([A-Z]+[0-9]*|\d+))?(?:\s+@(\d+))?$/) {
        return { type => 'kill-worker', signal => $1 // 'KILL', instance => $2, tests => 0 };
    }
    if ($line =~ /^jar\s+($CLIENT)\s+(.+)$/) {
        my ($client, $op) = ($1, $2);
        if ($op =~ /^set\s+([^=\s;]+)=(\S*)$/) {
            return { type => 'jar', client => $client, op => 'set', name => $1, value => $2, tests => 0 };
        }
        if ($op =~ /^(tamper|delete)\s+([^=\s;]+)$/) {
            return { type => 'jar', client => $client, op => $1, name => $2, tests => 0 };
        }
        if ($op =~ /^copy\s+($CLIENT)$/) {
            return { type => 'jar', client => $client, op => 'copy', to => $1, tests => 0 };
        }
        if ($op eq 'clear') {
            return { type => 'jar', client => $client, op => 'clear', tests => 0 };
        }
        if ($op =~ /^rename\s+([^=\s;]+)\s+([^=\s;]+)$/) {
            return { type => 'jar', client => $client, op => 'rename', name => $1, to_name => $2, tests => 0 };
        }
        die "unknown jar operation (set NAME=VALUE, tamper NAME, delete NAME, rename NAME NEW, copy CLIENT, clear)";
    }
    if ($line eq 'redis-stop' || $line eq 'redis-start') {
        return { type => $line, tests => 1 };
    }
    if ($line =~ m{^redis\s+(.+?)(?:\s+=>\s+$RE_TOKEN)?$}) {
        my ($args, $pat, $flags) = ($1, $2, $3);
        return { type => 'redis', args => [ _shell_words($args) ],
                 re => (defined $pat ? _regex($pat, $flags) : undef), tests => 1 };
    }
    return { type => 'request', req => parse_request($line), tests => 1 };
}

# Splits on whitespace, honouring "double" and 'single' quotes.
sub _shell_words {
    my ($s) = @_;
    my @w;
    while ($s =~ /\G\s*(?:"((?:\\.|[^\\"])*)"|'([^']*)'|(\S+))/gc) {
        push @w, defined $1 ? _unquote($1) : defined $2 ? $2 : $3;
    }
    return @w;
}

1;
