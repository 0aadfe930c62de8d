package SmartLimit::Test::Shell;

# A shell command of an `sh` / `bg-sh` step: `/bin/sh -c COMMAND` in its own
# process group, stdin from /dev/null, stdout and stderr together in a file,
# a time limit. Whatever is left of the group when the command ends, times
# out or is stopped is killed: a step never leaves processes behind (except
# ones that leave the group themselves: setsid, daemons). Linux (/proc).

use strict;
use warnings;

use IO::Handle ();
use POSIX ();
use Time::HiRes ();

# start(command => STRING, out => FILE, timeout => SECONDS, env => { NAME => VALUE })
sub start {
    my ($class, %a) = @_;
    open my $fh, '>', $a{out} or die "cannot write $a{out}: $!";
    close $fh;
    STDOUT->flush;
    STDERR->flush;
    my $t0 = Time::HiRes::time();
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        POSIX::setpgid(0, 0);
        $SIG{$_} = 'DEFAULT' for qw(INT TERM PIPE HUP QUIT CHLD ALRM);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $a{out} or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        $ENV{$_} = $a{env}{$_} for keys %{ $a{env} || {} };
        exec('/bin/sh', '-c', $a{command}) or POSIX::_exit(127);
    }
    POSIX::setpgid($pid, $pid);    # also here: no window where a kill of the group misses it
    return bless { %a, pid => $pid, t0 => $t0, deadline => $t0 + $a{timeout} }, $class;
}

sub pid { $_[0]{pid} }

# The process state letter from /proc/PID/stat, undef when there is no such process.
sub _state {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/stat" or return undef;
    my $s = <$f> // '';
    my $i = rindex($s, ')');
    return $i < 0 ? undef : substr($s, $i + 2, 1);
}

# True while the command (its shell) runs. Once it has exited, the rest of its
# process group is killed (the zombie keeps the group id from being reused)
# and it is reaped.
sub running {
    my ($self) = @_;
    return 0 if $self->{done};
    my $state = _state($self->{pid});
    return 1 if defined $state && $state ne 'Z' && $state ne 'X';
    $self->_reap;
    return 0;
}

# Live (not zombie) processes of process group $pgid, other than $except.
sub _group_members {
    my ($pgid, $except) = @_;
    opendir my $d, '/proc' or return ();
    my @m;
    for my $pid (grep { /^\d+$/ && $_ != $except } readdir $d) {
        open my $f, '<', "/proc/$pid/stat" or next;
        my $s = <$f> // '';
        my $i = rindex($s, ')');
        next if $i < 0;
        my ($state, undef, $pgrp) = split ' ', substr($s, $i + 2);
        push @m, $pid if defined $pgrp && $pgrp == $pgid && $state ne 'Z' && $state ne 'X';
    }
    return @m;
}

# The shell has exited (or is being killed): KILL what is left of its group,
# wait (at most 2 s) until it is gone, reap the shell.
sub _reap {
    my ($self) = @_;
    my $pid = $self->{pid};
    kill 'KILL', -$pid;
    my $until = Time::HiRes::time() + 2;
    while (_group_members($pid, $pid) && Time::HiRes::time() < $until) {
        Time::HiRes::sleep(0.01);
        kill 'KILL', -$pid;
    }
    my $r = waitpid($pid, 0);
    my $status = $?;
    $self->{elapsed} = Time::HiRes::time() - $self->{t0};
    $self->{done} = 1;
    if ($r != $pid) {
        $self->{lost} = 1;
    } elsif ($status & 127) {
        $self->{signal} = $status & 127;
    } else {
        $self->{exit} = $status >> 8;
    }
}

# Waits until the command ends; at its time limit, kills it.
sub wait_done {
    my ($self) = @_;
    while ($self->running) {
        if (Time::HiRes::time() >= $self->{deadline}) {
            $self->kill_group("timed out after $self->{timeout}s");
            last;
        }
        Time::HiRes::sleep(0.02);
    }
}

# TERM to the whole process group, KILL after 2 s; $reason is reported.
sub kill_group {
    my ($self, $reason) = @_;
    return if $self->{done};
    $self->{killed} = $reason;
    kill 'TERM', -$self->{pid};
    my $until = Time::HiRes::time() + 2;
    while ($self->running && Time::HiRes::time() < $until) {
        Time::HiRes::sleep(0.02);
    }
    $self->_reap unless $self->{done};    # KILLs the group, then reaps
}

# For the harness' cleanup on die / Ctrl-C.
sub stop { $_[0]->kill_group('stopped by the harness'); return (1, '') }

sub output {
    my ($self) = @_;
    open my $f, '<', $self->{out} or return '';
    binmode $f;
    local $/;
    my $s = <$f>;
    return $s // '';
}

# What went wrong with the process itself (undef when it exited 0).
sub failure {
    my ($self) = @_;
    return "$self->{killed} (process group killed)" if $self->{killed};
    return "lost track of the process" if $self->{lost};
    return "killed by signal $self->{signal}" if $self->{signal};
    return "exit $self->{exit}" if $self->{exit};
    return undef;
}

1;
