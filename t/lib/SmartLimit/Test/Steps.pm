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

my $VARNAME   = qr{[A-Z][A-Z0-9_]*};

my %RESERVED = map { ($_ => 1) } qw(repeat until parallel bg wait-bg sleep reload reload-with
    reload-expect-fail jar redis redis-stop redis-start kill-worker sh bg-sh nginx-stop
    nginx-start nginx-upgrade);

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

# A client source address: an IPv4 dotted quad inside 127.0.0.0/8 (the tests
# stay on loopback; every 127.x.y.z is local on Linux). Dies with the reason.
sub _source_address {
    my ($a) = @_;
    my @o = $a =~ /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/
        or die "bad source address 'from $a' (want an IPv4 address in 127.0.0.0/8, e.g. from 127.0.0.7)";
    die "bad source address 'from $a' (an octet is above 255 or has a leading zero)"
        if grep { $_ > 255 || /^0\d/ } @o;
    die "source address 'from $a' is outside 127.0.0.0/8 (tests stay on loopback)" unless $o[0] == 127;
    die "source address 'from $a' is the broadcast address of 127.0.0.0/8" if "@o" eq '127 255 255 255';
    return $a;
}

# "<client> <METHOD> <path>[ @N][ from ADDR][ Header: value | Header: value] => <status>[; check]..."
# `@N` and `from ADDR` come right after the path, in either order; `@N` may
# also end the headers (as before). `from ADDR` may not: a header value may
# contain those words.
sub parse_request {
    my ($line, $kind) = @_;
    $kind ||= 'request';
    my ($left, $right) = $line =~ /^(.*?)\s+=>\s+(.*)$/
        or die "missing ' => <status>'";
    my ($client, $method, $path, $rest) = $left =~ /^($CLIENT)\s+([A-Z]+)\s+(\S+)(.*)$/
        or die "want '<client> <METHOD> <path> ...' before '=>'";
    die "'$client' is a reserved word, not a client name" if $RESERVED{$client};
    my ($instance, $from);
    $rest =~ s/^\s+|\s+$//g;
    while (1) {
        if (!defined $instance && $rest =~ s/^@(\d+)(?:\s+|$)//) {
            $instance = $1;
        } elsif (!defined $from && $rest =~ s/^from(?:\s+(\S+))?(?:\s+|$)//) {
            die "'from' needs an address (from 127.0.0.7)" unless defined $1;
            $from = _source_address($1);
        } else {
            last;
        }
    }
    if (!defined $instance && $rest =~ s/\s*(?<!\S)@(\d+)$//) {
        $instance = $1;
    }
    $instance //= 1;
    my @headers;
    if (length $rest) {
        for my $h (split /\s+\|\s+/, $rest) {
            my $misplaced = "'from ADDR' goes right after the path (or after \@N), before the headers";
            die $misplaced if $h =~ /^from\s/;
            $h =~ /^($HNAME):\s*(.*?)\s*$/ or die "bad header '$h' (want 'Name: value', several separated by ' | ')";
            my ($name, $value) = ($1, $2);
            # "Accept: text/html from 127.0.0.2" is almost surely a misplaced `from`.
            die $misplaced if $value =~ /(?:^|\s)from\s+\d+(?:\.\d+){0,3}$/;
            push @headers, [$name, $value];
        }
    }
    my ($status_tok, $checks) = $right =~ /^(\S+?)(\s*;.*|\s*)$/
        or die "missing status after '=>'";
    my $status = _status_matcher($status_tok);
    my @checks = _parse_checks($checks, $kind);
    return {
        client => $client, method => $method, path => $path, instance => $instance,
        from => $from, headers => \@headers, status => $status, checks => \@checks,
    };
}

# Parses a whole `--- steps` section. $ctx: { instances => N, redis => bool,
# sections => { name => 1 } }. Returns the list of steps; each has `line`,
# `type` and `tests` (how many Test::More tests it emits). A step that uses a
# variable captured by an earlier `sh ... as $NAME` gets `vars` (the names):
# it is checked here with 1 in their place and parsed again, with their
# values, when it runs (parse_step).
sub parse {
    my ($text, $ctx) = @_;
    my @steps;
    my $n = 0;
    my %declared;
    for my $raw (split /\n/, $text // '') {
        $n++;
        (my $line = $raw) =~ s/^\s+|\s+$//g;
        next if $line eq '' || $line =~ /^#/;
        my @vars = vars_used($line, \%declared);
        my $step = eval {
            parse_step(@vars ? substitute_vars($line, { map { ($_ => 1) } @vars }) : $line, $ctx);
        };
        unless ($step) {
            (my $e = $@) =~ s/ at \S+ line \d+.*//s;
            chomp $e;
            die "steps line $n: $e\n  in: $line\n";
        }
        $step->{line} = $line;
        $step->{vars} = \@vars if @vars;
        $declared{ $step->{capture} } = 1 if $step->{capture};
        push @steps, $step;
    }
    return @steps;
}

# One step line (without its line number in the errors).
sub parse_step {
    my ($line, $ctx) = @_;
    my $step = _parse_line($line, $ctx);
    $step->{line} = $line;
    my $inst = $step->{instance} // ($step->{req} ? $step->{req}{instance} : undef);
    if (defined $inst && ($inst < 1 || $inst > $ctx->{instances})) {
        die "instance \@$inst does not exist (--- instances: $ctx->{instances})\n";
    }
    if ($step->{type} =~ /^redis/ && !$ctx->{redis}) {
        die "redis steps need a '--- redis' section\n";
    }
    for my $sec (@{ $step->{sections} || [] }) {
        die "no section '--- $sec' in this block\n" unless $ctx->{sections}{$sec};
        die "'$sec' is not a config section (config*, http_config*, main_config*)\n"
            unless $sec =~ /^(?:main_config|http_config|config)\w*$/;
    }
    return $step;
}

# The captured variables ($NAME or ${NAME}, names in %$declared) a line uses,
# not counting the `as $NAME` that ends an sh line.
sub vars_used {
    my ($line, $declared) = @_;
    $line =~ s/\s+as\s+\$$VARNAME$//;
    my %seen;
    while ($line =~ /\$(?:\{($VARNAME)\}|($VARNAME)(?!\w))/g) {
        my $k = $1 // $2;
        $seen{$k} = 1 if $declared->{$k};
    }
    return sort keys %seen;
}

# $NAME and ${NAME} replaced by their values in %$vals (others left alone),
# except in the `as $NAME` that ends an sh line.
sub substitute_vars {
    my ($line, $vals) = @_;
    my $tail = $line =~ s/(\s+as\s+\$$VARNAME)$// ? $1 : '';
    $line =~ s/\$(?:\{($VARNAME)\}|($VARNAME)(?!\w))/
        my $k = $1 \/\/ $2; exists $vals->{$k} ? $vals->{$k} : "\$$k"/ge;
    return $line . $tail;
}

# `sh [S:] COMMAND [=> /re/ [as $NAME]]`, `bg-sh` likewise.
sub _parse_sh {
    my ($kind, $rest) = @_;
    my $timeout = 60;
    if ($rest =~ s/^(\d+(?:\.\d+)?)\s*:\s*//) {
        $timeout = $1;
        die "$kind: the time limit must be above 0" unless $timeout > 0;
    }
    my ($re, $re_text, $capture);
    if ($rest =~ m{^(.*?\S)\s+=>\s+$RE_TOKEN(?:\s+as\s+\$(\S+))?$}) {
        my ($pat, $flags, $var);
        ($rest, $pat, $flags, $var) = ($1, $2, $3, $4);
        $re = _regex($pat, $flags);
        $re_text = "/$pat/$flags";
        if (defined $var) {
            die "$kind: 'as \$$var': variable names are upper case letters, digits and _ (as \$RPS)"
                unless $var =~ /^$VARNAME$/;
            die "$kind: 'as \$$var': TEST_NGINX_* names are reserved" if $var =~ /^TEST_NGINX_/;
            '' =~ /|$re/;
            die "$kind: 'as \$$var' needs a capture group in the regex (=> /Requests\\\/sec:\\s+(\\d+)/ as \$RPS)"
                unless $#+ >= 1;
            $capture = $var;
        }
    } elsif ($rest =~ /(?:^|\s)=>(?:\s|$)/) {
        die "$kind: after ' => ' comes /regex/, optionally followed by 'as \$NAME'"
            . ($rest =~ m{^[A-Z]+\s+/} ? " ('$kind' is a reserved word, not a client name)" : '');
    }
    die "$kind needs a command" unless $rest =~ /\S/;
    return { type => $kind, command => $rest, timeout => $timeout, re => $re, re_text => $re_text,
             capture => $capture, tests => 1 };
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
    if ($line =~ /^(sh|bg-sh)(?:\s+(.*))?$/) {
        return _parse_sh($1, $2 // '');
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
        if ($op =~ /^prepend\s+([^=\s;]+)=(\S*)$/) {
            return { type => 'jar', client => $client, op => 'prepend', name => $1, value => $2, tests => 0 };
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
        die "unknown jar operation (set NAME=VALUE, prepend NAME=VALUE, tamper NAME, delete NAME, rename NAME NEW, copy CLIENT, clear)";
    }
    # One node of a fleet stops, starts (again, or for the first time: --- later), or
    # upgrades its binary (USR2, WINCH and QUIT to the old master): a new master, new zones.
    if ($line =~ /^nginx-(stop|start|upgrade)\s+@(\d+)$/) {
        return { type => "nginx-$1", instance => $2, tests => 1 };
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
