#!/usr/bin/env perl
# Write N bytes of ANSI-heavy terminal output to stdout, deterministically:
# SGR colours (16, 256, truecolour, bold/italic/underline), UTF-8 text with
# wide characters (CJK, emoji), and TUI-style redraws (erase line, cursor up,
# carriage-return progress bars). Used by bench/ingest.
use strict;
use warnings;
use utf8;

my $target = shift // 64 * 1024 * 1024;
binmode STDOUT;
srand(2);

my @words = qw(build compile lane agent review patch worktree commit status
  diff merge rebase test check ok done fail retry queue job attempt evidence);
my @wide  = ("漢字", "表示", "端末", "🚀", "✅", "中文字符", "かな", "🦀");
my @uni   = ("é", "ü", "→", "✓", "…", "│", "─", "█", "░", "λ");

sub sgr {
    my $r = int(rand(5));
    return "\e[3" . int(rand(8)) . "m"                      if $r == 0;
    return "\e[1;9" . int(rand(8)) . "m"                    if $r == 1;
    return "\e[38;5;" . int(rand(256)) . "m"                if $r == 2;
    return sprintf("\e[38;2;%d;%d;%dm", rand(256), rand(256), rand(256)) if $r == 3;
    return "\e[" . (3 + int(rand(2))) . ";4" . int(rand(8)) . "m";
}

sub text_line {
    my $s = "";
    my $cols = 0;
    while ($cols < 100) {
        my $r = rand();
        my $w;
        if ($r < 0.6)    { $w = $words[rand @words]; $cols += length($w) + 1; }
        elsif ($r < 0.8) { $w = $uni[rand @uni];     $cols += 2; }
        else             { $w = $wide[rand @wide];   $cols += 2 * length($w) + 1; }
        $s .= sgr() . $w . "\e[0m ";
    }
    utf8::encode($s);
    return $s . "\r\n";
}

sub redraw {
    # A spinner/progress redraw: up a few lines, erase, rewrite.
    my $up = 1 + int(rand(3));
    my $s = "\e[${up}A";
    for (1 .. $up) {
        my $pct = int(rand(101));
        my $bar = "█" x int($pct / 5) . "░" x (20 - int($pct / 5));
        $s .= "\r\e[2K" . sgr() . "⠋ working" . "\e[0m [$bar] $pct%\e[K\r\n";
    }
    utf8::encode($s);
    return $s;
}

# One varied block (~1 MiB), repeated: the parser does the same work per byte.
my $block = "";
while (length($block) < 1024 * 1024) {
    $block .= rand() < 0.25 ? redraw() : text_line();
}
my $written = 0;
while ($written < $target) {
    my $chunk = $block;
    $chunk = substr($chunk, 0, $target - $written) if $written + length($chunk) > $target;
    print $chunk;
    $written += length($chunk);
}
