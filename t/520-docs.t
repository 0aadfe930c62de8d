# The documentation covers what the module accepts, and its links lead somewhere.
#
# - Every directive the module registers (`ngx_string!("smart_limit...")` in src/) has a
#   `### name` entry in docs/reference.md, and every such entry is a directive the module has.
# - Every parameter of `smart_limit_zone`, of `smart_limit_rate_zone` and of the Redis
#   connection (the parameter tables in core/src that the parsers look names up in) has a
#   `#### name=` entry in its section of the reference, and every entry there is accepted.
# - Every entry has its Syntax, Default and Context lines; every variable is mentioned.
# - Every relative link in README.md and docs/*.md points to an existing file (and, into a
#   Markdown file, to an existing heading); every page in docs/ is linked from README.md.
#
# Needs perl only (no nginx build): prove -I t/lib t/520-docs.t
#
# The extraction reads the Rust sources wherever they live under src/ and core/src/, and fails
# loudly when it finds suspiciously few names, so that a refactor which changes the patterns
# cannot make this test pass with nothing to check: then update the patterns below.

use strict;
use warnings;
use utf8;
use Test::More;
use File::Find ();
use File::Basename qw(dirname);
use File::Spec;
use Cwd qw(abs_path);

binmode(Test::More->builder->$_, ':encoding(UTF-8)') for qw(output failure_output todo_output);

my $ROOT = abs_path(dirname(__FILE__) . '/..');

# Files other changes are adding; a link to one of them passes while it is absent.
my %PENDING = map { $_ => 1 }
    qw(docs/architecture.md docs/upgrade.md docs/package.md contrib/README.md CHANGELOG.md);

# The smallest believable counts (today: 14 directives, 20 zone, 6 rate-zone and 10 Redis
# parameters, 4 variables).
my %AT_LEAST = (directives => 12, zone => 15, rate => 5, redis => 8, variables => 3);

sub slurp {
    my ($path) = @_;
    open my $fh, '<:encoding(UTF-8)', $path or die "cannot read $path: $!\n";
    local $/;
    return <$fh>;
}

sub rust_files {
    my ($dir) = @_;
    my @files;
    File::Find::find(
        { no_chdir => 1, wanted => sub { push @files, $_ if -f $_ && /\.rs\z/ } },
        "$ROOT/$dir");
    return sort @files;
}

sub rel { my ($p) = @_; return File::Spec->abs2rel($p, $ROOT) }

# ------------------------------------------------------------------ what the module accepts

my @src = rust_files('src');
my @core = rust_files('core/src');
ok(@src >= 5 && @core >= 5, 'found the Rust sources under src/ and core/src/')
    or BAIL_OUT('no Rust sources found: run from the repository');

# Directives: the command table's names.
my %directive;
for my $f (@src) {
    my $text = slurp($f);
    while ($text =~ /ngx_string!\s*\(\s*"(smart_limit\w*)"\s*\)/g) {
        $directive{$1} = rel($f);
    }
}

# Parameters: the tables `const NAME: &[(&str, &str)] = &[("size", "size=10m"), ...];` that the
# parsers look every `key=value` up in (a name missing there is an "unknown parameter").
my @tables;
for my $f (@core) {
    my $text = slurp($f);
    while ($text =~ /\bconst\s+(\w+)\s*:\s*&(?:'static\s+)?\[\(\s*&(?:'static\s+)?str\s*,\s*&(?:'static\s+)?str\s*\)\]\s*=\s*&\[(.*?)\];/sg) {
        my ($name, $body) = ($1, $2);
        my @names;
        while ($body =~ /\(\s*"(\w+)"\s*,\s*"(\w+)=/g) {
            push @names, $1 if $1 eq $2;    # ("size", "size=10m"): a name and its example
        }
        push @tables, { const => $name, file => rel($f), names => \@names } if @names;
    }
}

# Which table is which, by a name only it has.
my %table_of = (zone => 'max_active', rate => 'fallback', redis => 'redis_password_file');
my %param;
for my $kind (sort keys %table_of) {
    my @hits = grep { my $t = $_; grep { $_ eq $table_of{$kind} } @{ $t->{names} } } @tables;
    is(scalar @hits, 1, "one parameter table of $kind parameters (the one with $table_of{$kind})")
        or diag('parameter tables found: ',
                join(', ', map { "$_->{const} in $_->{file}" } @tables) || 'none');
    $param{$kind} = { map { $_ => 1 } map { @{ $_->{names} } } @hits };
}

# Each table name is handled by a parser's match arm (`"size" => ...`), so the tables are the
# parsers' and not some other list of pairs.
my %arm;
for my $f (@core) {
    my $text = slurp($f);
    $arm{$1} = 1 while $text =~ /"(\w+)"\s*=>/g;
}
for my $kind (sort keys %param) {
    my @unhandled = grep { !$arm{$_} } sort keys %{ $param{$kind} };
    is("@unhandled", '', "every $kind parameter has a parser arm (\"name\" =>) in core/src");
}

# Variables: the names registered next to ngx_http_add_variable.
my %variable;
for my $f (@src) {
    my $text = slurp($f);
    next unless $text =~ /ngx_http_add_variable/;
    $variable{$1} = 1 while $text =~ /"(smart_limit_\w+)"/g;
}

my %count = (
    directives => scalar(keys %directive),
    variables => scalar(keys %variable),
    map { $_ => scalar(keys %{ $param{$_} }) } keys %param,
);
my %label = (directives => 'directives', variables => 'variables', zone => 'zone parameters',
             rate => 'rate-zone parameters', redis => 'Redis parameters');
for my $what (sort keys %AT_LEAST) {
    cmp_ok($count{$what}, '>=', $AT_LEAST{$what}, "found $count{$what} $label{$what} in the sources")
        or diag("fewer than $AT_LEAST{$what} $label{$what}: the extraction patterns of $0 no "
              . 'longer match the sources; update them rather than this threshold');
}
note(sprintf 'module: %d directives, %d zone, %d rate-zone, %d Redis parameters, %d variables',
    @count{qw(directives zone rate redis variables)});

# ------------------------------------------------------------------ what the reference says

my $reference = "$ROOT/docs/reference.md";
ok(-f $reference, 'docs/reference.md exists') or BAIL_OUT('no docs/reference.md');

# Sections of parameters, by their exact `##` titles.
my %section_kind = (
    'Parameters of smart_limit_zone' => 'zone',
    'Parameters of smart_limit_rate_zone' => 'rate',
    'Redis connection parameters' => 'redis',
);
my %context_of = (
    zone => qr/\bsmart_limit_zone\b/,
    rate => qr/\bsmart_limit_rate_zone\b/,
    redis => qr/\bsmart_limit_zone\b.*\bsmart_limit_rate_zone\b/,
);

my (%doc_directive, %doc_param, @entries, @problems);
{
    my ($fence, $section, $entry) = (0, '');
    my $n = 0;
    for my $line (split /\n/, slurp($reference)) {
        $n++;
        if ($line =~ /^\s*(```|~~~)/) { $fence = !$fence; }
        if (!$fence && $line =~ /^(#{1,6})\s+(.*?)\s*$/) {
            my ($level, $title) = (length $1, $2);
            $entry = undef if $entry && $level <= $entry->{level};
            if ($level <= 2) {
                $section = $title;
            } elsif ($level == 3 && $title =~ /^(smart_limit\w*)$/) {
                push @problems, "line $n: directive $1 outside \"## Directives\""
                    unless $section eq 'Directives';
                push @problems, "line $n: directive $1 documented twice" if $doc_directive{$1}++;
                $entry = { kind => 'directive', name => $1, level => 3, line => $n, body => [] };
                push @entries, $entry;
            } elsif ($level == 4 && $title =~ /^(\w+)=$/) {
                my $kind = $section_kind{$section};
                if (!$kind) {
                    push @problems, "line $n: parameter $1= outside a parameter section";
                    next;
                }
                push @problems, "line $n: $kind parameter $1= documented twice"
                    if $doc_param{$kind}{$1}++;
                $entry = { kind => $kind, name => $1, level => 4, line => $n, body => [] };
                push @entries, $entry;
            }
            next;
        }
        push @{ $entry->{body} }, $line if $entry;
    }
}
is(join("\n", @problems), '', 'the reference has its entries where they belong, once each');

for my $kind (sort values %section_kind) {
    ok(exists $doc_param{$kind}, "the reference has its section of $kind parameters");
}

sub compare {
    my ($what, $accepted, $documented) = @_;
    my @missing = grep { !$documented->{$_} } sort keys %$accepted;
    my @extra = grep { !$accepted->{$_} } sort keys %$documented;
    is("@missing", '', "every $what the module accepts is in docs/reference.md");
    is("@extra", '', "every $what in docs/reference.md is one the module accepts");
}
compare('directive', \%directive, \%doc_directive);
compare("$_ parameter", $param{$_}, $doc_param{$_} || {}) for qw(zone rate redis);

# Each entry is written in nginx's format: Syntax, Default, Context.
my @malformed;
for my $e (@entries) {
    my $body = join "\n", @{ $e->{body} };
    my $what = $e->{kind} eq 'directive' ? $e->{name} : "$e->{kind} parameter $e->{name}=";
    my $syntax = $e->{kind} eq 'directive' ? qr/^Syntax:\s+\Q$e->{name}\E(?:\s|;)/m
                                            : qr/^Syntax:\s+\Q$e->{name}\E=/m;
    push @malformed, "$what (line $e->{line}): no \"Syntax: $e->{name}...\" line"
        unless $body =~ $syntax;
    push @malformed, "$what (line $e->{line}): no \"Default:\" line"
        unless $body =~ /^Default:\s+\S/m;
    if ($body !~ /^Context:\s+(.+)$/m) {
        push @malformed, "$what (line $e->{line}): no \"Context:\" line";
    } elsif ($e->{kind} ne 'directive' && $1 !~ $context_of{ $e->{kind} }) {
        push @malformed, "$what (line $e->{line}): its Context does not name its directive";
    }
}
is(join("\n", @malformed), '', 'every entry has its Syntax, Default and Context lines');

{
    my $text = slurp($reference);
    my @unmentioned = grep { index($text, "\$$_") < 0 } sort keys %variable;
    is("@unmentioned", '', 'every variable is in docs/reference.md');
}

# ------------------------------------------------------------------ links

# GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
sub slug {
    my ($t) = @_;
    $t =~ s/!?\[([^\]]*)\]\([^)]*\)/$1/g;
    $t = lc $t;
    $t =~ s/[^\p{L}\p{N}\p{M}_ \-]//g;
    $t =~ s/ /-/g;
    return $t;
}

my %anchors_cache;
sub anchors {
    my ($path) = @_;
    return $anchors_cache{$path} ||= do {
        my (%seen, %a);
        my $fence = 0;
        for my $line (split /\n/, slurp($path)) {
            if ($line =~ /^\s*(```|~~~)/) { $fence = !$fence; next; }
            next if $fence;
            $a{$1} = 1 while $line =~ /<a\s+(?:name|id)="([^"]+)"/g;
            next unless $line =~ /^#{1,6}\s+(.*?)\s*#*\s*$/;
            my $s = slug($1);
            my $k = $seen{$s}++;
            $a{ $k ? "$s-$k" : $s } = 1;
        }
        \%a;
    };
}

my @pages = ("$ROOT/README.md", sort glob("$ROOT/docs/*.md"));
my (@broken, @skipped, %linked_from_readme);
my $links = 0;
for my $page (@pages) {
    my $text = slurp($page);
    $text =~ s/^\s*(```|~~~).*?^\s*\1[^\n]*$//msg;    # fenced code
    $text =~ s/`[^`\n]*`//g;                          # code spans
    my @targets;
    push @targets, $1 while $text =~ /\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
    push @targets, $1 while $text =~ /^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$/mg;
    for my $target (@targets) {
        next if $target =~ /^[a-z][a-z0-9+.-]*:/i;    # http:, https:, mailto:
        $links++;
        my ($path, $fragment) = $target =~ /^([^#]*)(?:#(.*))?$/;
        my $file = $path eq '' ? $page
                 : File::Spec->canonpath(File::Spec->rel2abs($path, dirname($page)));
        1 while $file =~ s{/[^/]+/\.\.(/|$)}{$1};
        my $where = rel($page) . ": ($target)";
        if (!-e $file) {
            if ($PENDING{ rel($file) }) {
                push @skipped, $where;
            } else {
                push @broken, "$where: no such file";
            }
            next;
        }
        $linked_from_readme{ rel($file) } = 1 if $page eq "$ROOT/README.md";
        if (defined $fragment && length $fragment && $file =~ /\.md\z/ && -f $file) {
            push @broken, "$where: no heading with the anchor #$fragment in " . rel($file)
                unless anchors($file)->{$fragment};
        }
    }
}
note("link to a file being added elsewhere, not checked while it is absent: $_") for @skipped;
cmp_ok($links, '>=', 20, "found $links relative links in README.md and docs/*.md");
is(join("\n", @broken), '', 'every relative link points to an existing file and heading');

my @orphans = grep { !$linked_from_readme{$_} } map { rel($_) } sort glob("$ROOT/docs/*.md");
is("@orphans", '', 'every page in docs/ is linked from README.md');

done_testing();
