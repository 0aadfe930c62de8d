# Every file a comment or a document names exists (issue 49: comments and docs named files
# that had been renamed or never existed, e.g. `fleet_room.lua`, `core/src/room.rs`).
#
# Looks at the comments of the tracked source files (Rust `//`, Lua `--`, shell, Perl and
# Python `#`) and at the whole text of every tracked Markdown file but the changelog (a
# history names files that are gone). A name with a directory (`core/src/redis/room.lua`) must
# be a tracked path, from the repository's root, from the naming file's directory, or as the
# end of a tracked path; a bare name (`room.lua`) must be the name of some tracked file.
# Names of other projects' files and made-up examples are listed in %ELSEWHERE with why.
#
# Needs perl and git only: prove t/521-file-refs.t

use strict;
use warnings;
use Test::More;
use File::Basename qw(dirname basename);
use Cwd qw(abs_path);

my $ROOT = abs_path(dirname(__FILE__) . '/..');
chdir $ROOT or die "cannot enter $ROOT: $!\n";

# Names that are not this repository's files, and why.
my %ELSEWHERE = (
    'a.rs'                  => 'scripts/check-layout: an example of a module file',
    'a/mod.rs'              => 'scripts/check-layout: an example of a module file',
    't/010-foo.t'           => 'an example test file name in the test docs',
    'src/net/peer_conn.rs'  => "nginx-acme's peer connection, the model of src/net/peer.rs",
);

my @files = grep { length } split /\n/, `git ls-files`;
plan skip_all => 'not a git checkout' if $? != 0 || !@files;

my %path = map { $_ => 1 } @files;
my %name = map { basename($_) => 1 } @files;

sub exists_as {
    my ($ref, $from) = @_;
    return 1 if $ELSEWHERE{$ref};
    (my $bare = $ref) =~ s{^\./}{};
    return $name{$bare} ? 1 : 0 if $bare !~ m{/};
    return 1 if $path{$bare};
    my @parts;
    for my $part (split m{/}, dirname($from) . "/$bare") {
        next if $part eq '.' || $part eq '';
        if ($part eq '..') { pop @parts } else { push @parts, $part }
    }
    return 1 if $path{join '/', @parts};
    return (grep { substr($_, -length("/$bare")) eq "/$bare" } @files) ? 1 : 0;
}

# The comment part of a line, by the file's language (undef: no comment on it).
sub comment_of {
    my ($file, $line) = @_;
    return $line if $file =~ /\.md\z/;
    return $line =~ m{//(.*)} ? $1 : undef if $file =~ /\.(?:rs|mjs)\z/;
    return $line =~ /--(.*)/ ? $1 : undef if $file =~ /\.lua\z/;
    return $line =~ /#(.*)/ ? $1 : undef if $file =~ /\.(?:sh|pl|pm|t|py)\z/ || $file =~ m{^scripts/};
    return undef;
}

my $TOKEN = qr{(?<![\w./\@:-])((?:[\w.-]+/)*[\w-]+\.(?:rs|lua|md|sh|pl|pm|t|mjs|py|toml))\b};

my ($looked, @missing) = (0);
for my $file (@files) {
    # (The changelog is history; this file names the old names it was written to catch.)
    next if $file eq 'CHANGELOG.md' || $file eq 't/521-file-refs.t';
    next if $file =~ m{^(?:fuzz/corpus|fuzz/dict)/};
    next unless $file =~ /\.(?:rs|lua|md|sh|pl|pm|t|py|mjs)\z/ || $file =~ m{^scripts/};
    open my $fh, '<', $file or next;
    my $n = 0;
    while (my $line = <$fh>) {
        $n++;
        my $text = comment_of($file, $line);
        next unless defined $text;
        $text =~ s{https?://\S+}{}g;
        while ($text =~ /$TOKEN/g) {
            $looked++;
            push @missing, "$file:$n names $1" unless exists_as($1, $file);
        }
    }
    close $fh;
}

# A pattern that stopped matching would make this test pass with nothing checked.
cmp_ok($looked, '>', 200, "file names found in comments and docs ($looked)");
is(scalar @missing, 0, 'every file a comment or doc names exists')
    or diag(join "\n", @missing);
done_testing();
