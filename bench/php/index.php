<?php
// Workloads k1 and k2 of bench/run: a blog front page in the spirit of the
// Kangle article's Typecho install (default theme, 10 posts, sidebar), made
// self-contained: the posts, comments and widgets come from PHP arrays
// built from a seeded generator, not a database. Each request builds the
// data, renders about 30 KB of HTML with htmlspecialchars on every field,
// counts tags and words over all posts for the sidebar, and formats dates,
// which costs a few milliseconds of PHP time, as a small CMS page does.
// The output is the same on every request (fixed seed, fixed timestamps,
// UTC), so the harness can compare what nginx and sluice send.

date_default_timezone_set('UTC');
mt_srand(20261127);

$words = explode(' ', 'the of and to in is that for it as was with be by on not he this are or '
    . 'his from at which but have an they you were her she there been one all we their has '
    . 'would when if so no what up out more about into them can only other time new some could '
    . 'these two may first then do any like my now over such our man me even most made after '
    . 'also did many before must through back years where much your way well down should '
    . 'because each just those people how too little state good very make world still own see '
    . 'server request response cache proxy upstream connection header client memory config '
    . 'module worker process socket buffer latency throughput benchmark kernel thread queue '
    . 'timeout compression static file release feature performance documentation example '
    . 'tutorial guide install package system service signal upgrade build test review patch');
$nwords = count($words);

function pick(array $words, int $n, int $lo, int $hi): array {
    $out = [];
    $k = mt_rand($lo, $hi);
    for ($i = 0; $i < $k; $i++) {
        // Zipf-like: small indexes (common words) come up more often.
        $r = mt_rand(0, 1000000) / 1000000.0;
        $out[] = $words[(int) floor($n * $r * $r * $r)];
    }
    return $out;
}

function sentence(array $words, int $n, int $lo = 6, int $hi = 16): string {
    $s = implode(' ', pick($words, $n, $lo, $hi));
    return ucfirst($s) . (mt_rand(0, 9) < 8 ? '.' : '?');
}

$authors = ['Alice Martin', 'Bob Chen', 'Chloé Dubois', 'Dmitri Ivanov', 'Eve O\'Neil'];
$categories = ['Releases', 'Tutorials', 'Benchmarks', 'Community', 'Security & Privacy'];
$base = 1767225600;   // 2026-01-01 00:00 UTC

$posts = [];
for ($i = 0; $i < 80; $i++) {
    $paras = [];
    for ($p = 0, $np = mt_rand(3, 5); $p < $np; $p++) {
        $ss = [];
        for ($s = 0, $ns = mt_rand(3, 6); $s < $ns; $s++) {
            $ss[] = sentence($words, $nwords);
        }
        $paras[] = implode(' ', $ss);
    }
    $comments = [];
    for ($c = 0, $nc = mt_rand(0, 8); $c < $nc; $c++) {
        $comments[] = ['author' => $authors[mt_rand(0, 4)], 'text' => sentence($words, $nwords, 4, 20),
                       'time' => $base + $i * 86400 + $c * 3600];
    }
    $posts[] = [
        'id' => 1000 - $i,
        'title' => sentence($words, $nwords, 3, 8) . ($i % 7 == 3 ? ' <b>&</b> "more"' : ''),
        'author' => $authors[mt_rand(0, 4)],
        'category' => $categories[mt_rand(0, 4)],
        'time' => $base + (80 - $i) * 86400 + mt_rand(0, 86399),
        'paras' => $paras,
        'tags' => array_values(array_unique(pick($words, 60, 2, 5))),
        'comments' => $comments,
    ];
}
usort($posts, fn($a, $b) => $b['time'] <=> $a['time']);

// Sidebar data: tag cloud and word statistics over every post.
$tagCount = [];
$wordCount = [];
foreach ($posts as $post) {
    foreach ($post['tags'] as $t) {
        $tagCount[$t] = ($tagCount[$t] ?? 0) + 1;
    }
    foreach ($post['paras'] as $para) {
        foreach (str_word_count(strtolower($para), 1) as $w) {
            $wordCount[$w] = ($wordCount[$w] ?? 0) + 1;
        }
    }
}
arsort($tagCount);
arsort($wordCount);
$archives = [];
foreach ($posts as $post) {
    $k = date('Y-m', $post['time']);
    $archives[$k] = ($archives[$k] ?? 0) + 1;
}
krsort($archives);

function e(string $s): string {
    return htmlspecialchars($s, ENT_QUOTES | ENT_HTML5, 'UTF-8');
}

function slug(string $s): string {
    return trim(preg_replace('/[^a-z0-9]+/', '-', strtolower($s)), '-');
}

ob_start();
?>
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>The Sluice Blog - Notes on web servers</title>
<link rel="stylesheet" href="/usr/themes/default/normalize.css">
<link rel="stylesheet" href="/usr/themes/default/grid.css">
<link rel="stylesheet" href="/usr/themes/default/style.css">
<link rel="alternate" type="application/rss+xml" title="RSS 2.0" href="/feed/">
</head>
<body>
<header id="header" class="clearfix">
<div class="container"><div class="row">
<div class="site-name col-mb-12 col-9"><a id="logo" href="/">The Sluice Blog</a>
<p class="description">Notes on web servers, proxies and caches</p></div>
<div class="site-search col-3 kit-hidden-tb">
<form id="search" method="post" action="/" role="search"><label for="s" class="sr-only">Search</label>
<input type="text" id="s" name="s" class="text" placeholder="Search"><button type="submit" class="submit">Search</button></form></div>
<div class="col-mb-12"><nav id="nav-menu" class="clearfix" role="navigation">
<a class="current" href="/">Home</a>
<?php foreach ($categories as $c): ?><a href="/category/<?= slug($c) ?>/" title="<?= e($c) ?>"><?= e($c) ?></a>
<?php endforeach; ?></nav></div>
</div></div>
</header>
<div id="body"><div class="container"><div class="row">
<div class="col-mb-12 col-8" id="main" role="main">
<?php foreach (array_slice($posts, 0, 10) as $post):
    $words_in = 0;
    foreach ($post['paras'] as $para) { $words_in += str_word_count($para); }
    $excerpt = substr(implode(" ", $post["paras"]), 0, 1400);
?>
<article class="post" itemscope itemtype="http://schema.org/BlogPosting">
<h2 class="post-title" itemprop="name headline"><a itemprop="url" href="/archives/<?= $post['id'] ?>/"><?= e($post['title']) ?></a></h2>
<ul class="post-meta">
<li itemprop="author" itemscope itemtype="http://schema.org/Person">Author: <a itemprop="name" href="/author/<?= slug($post['author']) ?>/" rel="author"><?= e($post['author']) ?></a></li>
<li>Date: <time datetime="<?= date('c', $post['time']) ?>" itemprop="datePublished"><?= date('F j, Y', $post['time']) ?></time></li>
<li>Category: <a href="/category/<?= slug($post['category']) ?>/"><?= e($post['category']) ?></a></li>
<li itemprop="interactionCount"><a itemprop="discussionUrl" href="/archives/<?= $post['id'] ?>/#comments"><?= count($post['comments']) ?> comments</a></li>
<li><?= number_format($words_in) ?> words, <?= max(1, (int) round($words_in / 200)) ?> min read</li>
</ul>
<div class="post-content" itemprop="articleBody">
<?php foreach (explode("\n", wordwrap($excerpt, 400, "\n", true)) as $chunk): ?><p><?= e($chunk) ?></p>
<?php endforeach; ?><p class="more"><a href="/archives/<?= $post['id'] ?>/" title="<?= e($post['title']) ?>">Read more - <?= e($post['title']) ?></a></p>
</div>
<p class="tags">Tags: <?= implode(', ', array_map(fn($t) => '<a href="/tag/' . rawurlencode($t) . '/">' . e($t) . '</a>', $post['tags'])) ?></p>
</article>
<?php endforeach; ?>
<ol class="page-navigator"><li class="current"><a href="/page/1/">1</a></li><li><a href="/page/2/">2</a></li><li><a href="/page/3/">3</a></li><li><a href="/page/4/">4</a></li><li class="next"><a href="/page/2/">Next &raquo;</a></li></ol>
</div>
<div class="col-mb-12 col-offset-1 col-3 kit-hidden-tb" id="secondary" role="complementary">
<section class="widget"><h3 class="widget-title">Recent posts</h3><ul class="widget-list">
<?php foreach (array_slice($posts, 0, 10) as $post): ?><li><a href="/archives/<?= $post['id'] ?>/"><?= e($post['title']) ?></a></li>
<?php endforeach; ?></ul></section>
<section class="widget"><h3 class="widget-title">Recent comments</h3><ul class="widget-list">
<?php $n = 0; foreach ($posts as $post) { foreach ($post['comments'] as $c) { if ($n++ >= 10) break 2; ?><li><a href="/archives/<?= $post['id'] ?>/#comment-<?= $c['time'] ?>"><?= e($c['author']) ?></a>: <?= e(substr($c['text'], 0, 60)) ?></li>
<?php } } ?></ul></section>
<section class="widget"><h3 class="widget-title">Categories</h3><ul class="widget-list">
<?php foreach ($categories as $c): ?><li><a href="/category/<?= slug($c) ?>/"><?= e($c) ?></a> (<?= count(array_filter($posts, fn($p) => $p['category'] === $c)) ?>)</li>
<?php endforeach; ?></ul></section>
<section class="widget"><h3 class="widget-title">Archives</h3><ul class="widget-list">
<?php foreach ($archives as $k => $n): ?><li><a href="/<?= str_replace('-', '/', $k) ?>/"><?= date('F Y', strtotime($k . '-01')) ?></a> (<?= $n ?>)</li>
<?php endforeach; ?></ul></section>
<section class="widget"><h3 class="widget-title">Tags</h3><p class="tag-cloud">
<?php foreach (array_slice($tagCount, 0, 40, true) as $t => $n): ?><a href="/tag/<?= rawurlencode($t) ?>/" style="font-size: <?= 10 + min(12, 2 * $n) ?>px"><?= e($t) ?></a>
<?php endforeach; ?></p></section>
<section class="widget"><h3 class="widget-title">Most used words</h3><ol class="widget-list">
<?php foreach (array_slice($wordCount, 0, 30, true) as $w => $n): ?><li><?= e($w) ?> <span class="count"><?= number_format($n) ?></span></li>
<?php endforeach; ?></ol></section>
<section class="widget"><h3 class="widget-title">Meta</h3><ul class="widget-list"><li><a href="/admin/login.php">Log in</a></li><li><a href="/feed/">Entries RSS</a></li><li><a href="/feed/comments/">Comments RSS</a></li></ul></section>
</div>
</div></div></div>
<footer id="footer" role="contentinfo">&copy; <?= date('Y', $base) ?> <a href="/">The Sluice Blog</a>. Powered by PHP <?= PHP_MAJOR_VERSION ?>.<?= PHP_MINOR_VERSION ?>.</footer>
</body>
</html>
<?php
$html = ob_get_clean();
header('Content-Type: text/html; charset=UTF-8');
echo $html;
