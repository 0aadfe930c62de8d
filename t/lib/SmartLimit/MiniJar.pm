package SmartLimit::MiniJar;

# A cookie jar for HTTP::Tiny (its interface: `add` and `cookie_header`), so a client made
# with it comes back from the room's cookie check (307) with its ticket, as a browser does.
# One jar is one client. Paths, domains and expiry dates are ignored: the tests talk to one
# origin, and a cookie is removed only by an empty value or Max-Age=0.

use strict;
use warnings;

sub new { bless { c => {} }, shift }

sub add {
    my ($s, $url, $h) = @_;
    my ($pair) = split /;/, $h, 2;
    my ($n, $v) = split /=/, $pair, 2;
    return unless defined $v;
    $n =~ s/^\s+|\s+$//g;
    if ($v eq '' || $h =~ /max-age\s*=\s*0/i) { delete $s->{c}{$n} } else { $s->{c}{$n} = $v }
}

sub cookie_header {
    my $s = shift;
    return join '; ', map { "$_=$s->{c}{$_}" } sort keys %{ $s->{c} };
}

1;
