"""Writes release_names.tsv: the labelled sample of release names (docs/indexer.md).

Every name here is written by the team, by the naming conventions in use (scene rules for
TV, movies, music and software; the P2P habits of the large groups; fansub brackets for
anime; comic and e-book library names; game repackers). Nothing is taken from any parser's
test data. Each row records its source: ``written: <convention>``. The labels are what the
convention says the name means, set here beside the name, never read from a parser.

The sample was generated once and frozen (committed) before the classifier was tuned; this
script is kept so the way it was written can be read, not to be re-run (re-running with the
same seed writes the same file). ``part`` is ``tune`` or ``held``: every third row of each
type is held back from tuning, and docs/indexer.md reports accuracy on the held part.

``--fresh SEED`` writes a second held sample (held_SEED.tsv, every row held): the same
conventions and titles drawn again with another seed, each title's form drawn at random
instead of by its place in the list, and without the hand-written rows (which tuning has
seen). It is frozen before the classifier changes again, and measured once after.

Columns: name, files (``path:size`` of the largest files, ``|``-separated; empty: a
single-file torrent named ``name``), total_size, type, tags, title, year, season,
season_end, episode, episode_end, resolution, source, part.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

R = random.Random(34)
FRESH = False  # --fresh: each title's form drawn at random, not by its place in the list


def form(i: int, forms: int) -> int:
    """Which of a type's naming forms the i-th title is written in."""
    return R.randrange(forms) if FRESH else i % forms
GB, MB = 1 << 30, 1 << 20

SHOWS = ["The Expanse", "Breaking Bad", "Severance", "The Bear", "Slow Horses", "Foundation", "Shogun",
         "The Last of Us", "Better Call Saul", "Andor", "Fargo", "Succession", "Ted Lasso", "Dark",
         "The Wire", "Mr Robot", "Reservation Dogs", "Only Murders in the Building", "Abbott Elementary",
         "The Office US", "Doctor Who", "House of the Dragon", "True Detective", "Peaky Blinders",
         "The Crown", "Yellowstone", "Silo", "Bluey", "Top Gear", "Taskmaster", "Stranger Things",
         "Westworld", "The Boys", "Invincible", "Black Mirror", "Mindhunter", "Chernobyl", "Barry"]
ANIME = ["Frieren", "Spy x Family", "Jujutsu Kaisen", "Dandadan", "Blue Lock", "Oshi no Ko",
         "Mushoku Tensei", "Vinland Saga", "Dungeon Meshi", "Kaiju No 8", "One Piece", "Bocchi the Rock"]
MOVIES = [("Dune Part Two", 2024), ("Oppenheimer", 2023), ("Blade Runner 2049", 2017), ("Arrival", 2016),
          ("2001 A Space Odyssey", 1968), ("The Matrix", 1999), ("Parasite", 2019), ("Past Lives", 2023),
          ("Mad Max Fury Road", 2015), ("Inception", 2010), ("Heat", 1995), ("Alien", 1979),
          ("The Godfather", 1972), ("Spirited Away", 2001), ("Everything Everywhere All at Once", 2022),
          ("Anatomy of a Fall", 2023), ("Poor Things", 2023), ("The Holdovers", 2023), ("Her", 2013),
          ("Drive", 2011), ("Se7en", 1995), ("1917", 2019), ("Children of Men", 2006), ("Up", 2009),
          ("The Thing", 1982), ("Aliens", 1986), ("Amelie", 2001), ("Zodiac", 2007), ("Whiplash", 2014),
          ("Prisoners", 2013), ("The Social Network", 2010), ("Moonlight", 2016), ("Roma", 2018),
          ("Nomadland", 2020), ("Tar", 2022), ("Perfect Days", 2023), ("Godzilla Minus One", 2023),
          ("Civil War", 2024), ("Furiosa", 2024), ("Twisters", 2024)]
ARTISTS = [("Pink Floyd", "The Dark Side of the Moon", 1973), ("Radiohead", "OK Computer", 1997),
           ("Daft Punk", "Random Access Memories", 2013), ("Taylor Swift", "Midnights", 2022),
           ("Miles Davis", "Kind of Blue", 1959), ("Kendrick Lamar", "To Pimp a Butterfly", 2015),
           ("Bjork", "Homogenic", 1997), ("Massive Attack", "Mezzanine", 1998), ("Beyonce", "Renaissance", 2022),
           ("Fleetwood Mac", "Rumours", 1977), ("Nirvana", "Nevermind", 1991), ("Adele", "30", 2021),
           ("Arctic Monkeys", "AM", 2013), ("Portishead", "Dummy", 1994), ("Aphex Twin", "Syro", 2014),
           ("Billie Eilish", "Hit Me Hard and Soft", 2024), ("The Beatles", "Abbey Road", 1969),
           ("Boards of Canada", "Music Has the Right to Children", 1998), ("Sade", "Love Deluxe", 1992),
           ("Burial", "Untrue", 2007)]
BOOKS = [("Andy Weir", "Project Hail Mary", 2021), ("Ursula K Le Guin", "The Dispossessed", 1974),
         ("Frank Herbert", "Dune", 1965), ("Kazuo Ishiguro", "Klara and the Sun", 2021),
         ("Sally Rooney", "Intermezzo", 2024), ("Brandon Sanderson", "The Way of Kings", 2010),
         ("Ted Chiang", "Exhalation", 2019), ("Martin Kleppmann", "Designing Data-Intensive Applications", 2017),
         ("Yuval Noah Harari", "Sapiens", 2014), ("Octavia E Butler", "Kindred", 1979),
         ("Liu Cixin", "The Three-Body Problem", 2008), ("N K Jemisin", "The Fifth Season", 2015),
         ("Donna Tartt", "The Secret History", 1992), ("Cormac McCarthy", "The Road", 2006),
         ("Susanna Clarke", "Piranesi", 2020), ("Mary Shelley", "Frankenstein", 1818)]
COMICS = ["Batman", "Saga", "Spider-Man", "The Walking Dead", "X-Men", "Monstress", "Paper Girls",
          "Invincible", "Sandman", "Hellboy", "Daredevil", "Something is Killing the Children", "Berserk",
          "One Piece", "Chainsaw Man", "Lazarus", "Y The Last Man", "Fables"]
SOFTWARE = [("Adobe Photoshop 2024", "v25.0.0.37"), ("Microsoft Office Professional Plus 2021", "v2108"),
            ("VLC Media Player", "3.0.20"), ("Blender", "4.1.1"), ("AutoCAD 2025", "v2025.1"),
            ("DaVinci Resolve Studio", "18.6.4"), ("WinRAR", "7.00"), ("Ableton Live Suite", "12.0.5"),
            ("JetBrains IntelliJ IDEA Ultimate", "2024.1"), ("Windows 11 Pro 23H2", "22631.3447"),
            ("Sketchup Pro 2024", "24.0.484"), ("Native Instruments Komplete 14", "v14.0"),
            ("CorelDRAW Graphics Suite 2024", "25.0.0.230"), ("Internet Download Manager", "6.42 Build 8"),
            ("FL Studio Producer Edition", "21.2.3"), ("Topaz Video AI", "5.0.3")]
DISTROS = ["ubuntu-24.04-desktop-amd64.iso", "debian-12.5.0-amd64-netinst.iso", "Fedora-Workstation-Live-x86_64-40-1.14.iso",
           "archlinux-2024.06.01-x86_64.iso", "linuxmint-21.3-cinnamon-64bit.iso", "kali-linux-2024.2-installer-amd64.iso",
           "openSUSE-Tumbleweed-DVD-x86_64-Current.iso", "TrueNAS-SCALE-24.04.1.iso", "proxmox-ve_8.2-1.iso",
           "FreeBSD-14.1-RELEASE-amd64-dvd1.iso", "Rocky-9.4-x86_64-dvd.iso", "pop-os_22.04_amd64_nvidia_42.iso"]
GAMES = ["Cyberpunk 2077", "Elden Ring", "Baldurs Gate 3", "Hades II", "Stardew Valley", "Red Dead Redemption 2",
         "Starfield", "Hollow Knight", "Disco Elysium", "Sekiro Shadows Die Twice", "Factorio", "Balatro",
         "Alan Wake 2", "Lies of P", "Hogwarts Legacy", "Dave the Diver", "Palworld", "Manor Lords",
         "Celeste", "Terraria", "Doom Eternal", "Hitman 3", "Frostpunk 2", "Satisfactory"]
XXX_SITES = ["Brazzers", "RealityKings", "Vixen", "Blacked", "Tushy", "NaughtyAmerica", "BangBros", "DigitalPlayground"]
XXX_NAMES = ["Anna Example", "Bella Sample", "Cara Placeholder", "Dana Fictive", "Eva Pseudonym", "Fay Moniker"]
GROUPS_TV = ["NTb", "FLUX", "KiNGS", "SuccessfulCrab", "EDITH", "GGEZ", "TEPES", "CAKES", "NOSiViD", "MeGusta", "BAE"]
GROUPS_MOVIE = ["FLUX", "NTb", "SPARKS", "AMIABLE", "GECKOS", "DON", "FraMeSToR", "EVO", "CMRG", "SWTYBLZ", "playBD"]
RES = ["480p", "720p", "1080p", "2160p"]
WEB = ["WEB-DL", "WEBRip", "WEB", "BluRay", "HDTV"]
CODECS = ["x264", "x265", "H.264", "H.265", "HEVC", "AVC"]

rows: List[Dict[str, Any]] = []


def dotted(title: str) -> str:
    return title.replace(" ", ".").replace("'", "")


def row(name: str, type_: str, source: str, *, files: str = "", size: int = 0, tags: str = "", title: str = "",
        year: Optional[int] = None, season: Optional[int] = None, season_end: Optional[int] = None,
        episode: Optional[int] = None, episode_end: Optional[int] = None, res: str = "") -> None:
    rows.append({"name": name, "files": files, "total_size": size, "type": type_, "tags": tags, "title": title,
                 "year": year or "", "season": "" if season is None else season,
                 "season_end": "" if season_end is None else season_end,
                 "episode": "" if episode is None else episode,
                 "episode_end": "" if episode_end is None else episode_end, "resolution": res,
                 "source": "written: " + source})


def video_files(name: str, n: int, each: int, ext: str = "mkv") -> str:
    if n == 1:
        return ""
    return "|".join(f"{name}/{name}.E{i + 1:02d}.{ext}:{each}" for i in range(min(n, 3)))


def tv() -> None:
    for i, show in enumerate(SHOWS):
        s, e = R.randint(1, 9), R.randint(1, 24)
        res, src, codec, grp = R.choice(RES), R.choice(WEB), R.choice(CODECS), R.choice(GROUPS_TV)
        size = R.randint(200, 4000) * MB
        kind = form(i, 8)
        if kind == 0:
            name = f"{dotted(show)}.S{s:02d}E{e:02d}.{res}.{src}.{codec}-{grp}"
            row(name, "tv_show", "scene TV episode", size=size, title=show, season=s, episode=e, res=res)
        elif kind == 1:
            name = f"{dotted(show)}.S{s:02d}E{e:02d}.The.Long.Night.{res}.AMZN.WEB-DL.DDP5.1.{codec}-{grp}"
            row(name, "tv_show", "scene TV episode with episode title", size=size, title=show, season=s, episode=e,
                res=res)
        elif kind == 2:
            name = f"{dotted(show)}.S{s:02d}.{res}.{src}.{codec}-{grp}"
            row(name, "tv_show", "scene TV season pack", files=video_files(name, 8, size // 8), size=size * 8,
                title=show, season=s, res=res)
        elif kind == 3:
            name = f"{show} (20{R.randint(10, 23)}) Season {s} S{s:02d} ({res} {src} x265 10bit EAC3 5.1 Silence)"
            row(name, "tv_show", "P2P season pack with year", files=video_files(name, 10, size // 10),
                size=size * 10, title=show, season=s, res=res)
            rows[-1]["year"] = int(name.split("(")[1][:4])
        elif kind == 4:
            name = f"{dotted(show)}.S{s:02d}E{e:02d}E{e + 1:02d}.{res}.{src}.{codec}-{grp}"
            row(name, "tv_show", "scene TV multi-episode", size=size, title=show, season=s, episode=e,
                episode_end=e + 1, res=res)
        elif kind == 5:
            name = f"{show} S01-S0{s if s > 1 else 3} Complete {res} {src} {codec}"
            row(name, "tv_show", "P2P multi-season pack", files=video_files(name, 20, size // 10), size=size * 20,
                title=show, season=1, season_end=s if s > 1 else 3, res=res)
        elif kind == 6:
            name = f"{show} {s}x{e:02d} HDTV XviD-{grp}"
            row(name, "tv_show", "old scene NxNN episode", files="", size=350 * MB, title=show, season=s, episode=e)
        else:
            name = f"{show} - S{s:02d}E{e:02d} - {res} {src} {codec}.mkv"
            row(name, "tv_show", "P2P single episode file", size=size, title=show, season=s, episode=e, res=res)
    for i, show in enumerate(ANIME):
        e, res = R.randint(1, 24), R.choice(["720p", "1080p"])
        grp = ["SubsPlease", "Erai-raws", "Judas", "EMBER", "ASW", "Anime Time"][i % 6]
        kind = form(i, 3)
        if kind == 0:
            name = f"[{grp}] {show} - {e:02d} ({res}) [{R.getrandbits(32):08X}].mkv"
            row(name, "tv_show", "fansub episode, absolute number", size=R.randint(300, 1500) * MB, tags="anime",
                title=show, episode=e, res=res)
        elif kind == 1:
            s = R.randint(2, 3)
            name = f"[{grp}] {show} S{s} - {e:02d} [{res}][Multiple Subtitle]"
            row(name, "tv_show", "fansub episode, season mark", size=R.randint(300, 1500) * MB, tags="anime",
                title=show, season=s, episode=e, res=res)
        else:
            name = f"[{grp}] {show} (Season 1) [{res}][HEVC x265 10bit][Dual-Audio][Batch]"
            row(name, "tv_show", "fansub season batch", files=video_files(name, 12, 400 * MB), size=12 * 400 * MB,
                tags="anime", title=show, season=1, res=res)


def movies() -> None:
    for i, (title, year) in enumerate(MOVIES):
        res, grp, codec = R.choice(RES), R.choice(GROUPS_MOVIE), R.choice(CODECS)
        size = R.randint(700, 60000) * MB
        kind = form(i, 6)
        if kind == 0:
            name = f"{dotted(title)}.{year}.{res}.BluRay.{codec}-{grp}"
            src = "scene movie"
        elif kind == 1:
            name = f"{title} ({year}) [{res}] [BluRay] [5.1] [YTS.MX]"
            src = "YTS P2P movie"
        elif kind == 2:
            name = f"{dotted(title)}.{year}.2160p.UHD.BluRay.REMUX.HDR.HEVC.Atmos-{grp}"
            res = "2160p"
            src = "UHD remux"
        elif kind == 3:
            name = f"{title} ({year}) {res} WEBRip x265 10bit AAC5.1 - {grp}"
            src = "P2P x265 encode"
        elif kind == 4:
            name = f"{dotted(title)}.{year}.PROPER.{res}.WEB.H264-{grp}"
            src = "scene movie PROPER"
        else:
            name = f"{title} {year} {res} AMZN WEB-DL DDP5 1 H 264-{grp}.mkv"
            src = "P2P movie single file"
        files = "" if name.endswith(".mkv") else f"{name}/{name}.mkv:{size}|{name}/Sample/sample.mkv:{30 * MB}"
        row(name, "movie", src, files=files, size=size, title=title, year=year, res=res)


def music() -> None:
    for i, (artist, album, year) in enumerate(ARTISTS):
        kind = form(i, 5)
        tracks = R.randint(8, 14)
        if kind == 0:
            name, ext, src = f"{artist} - {album} ({year}) [FLAC]", "flac", "P2P album, FLAC"
        elif kind == 1:
            name = f"{dotted(artist).replace('.', '_')}-{album.replace(' ', '_')}-WEB-{year}-ENRAGED"
            ext, src = "mp3", "scene MP3 album"
        elif kind == 2:
            name, ext, src = f"{artist} - {album} ({year}) [24bit Hi-Res FLAC]", "flac", "hi-res album"
        elif kind == 3:
            name, ext, src = f"{artist} - Discography (1990-2020) [MP3 320kbps]", "mp3", "discography"
            year = 0
        else:
            name, ext, src = f"{artist} - {album} {year} Remastered MP3 320", "mp3", "P2P album, MP3"
        each = (30 if ext == "flac" else 9) * MB
        files = "|".join(f"{name}/{t + 1:02d} - Track {t + 1}.{ext}:{each}" for t in range(3))
        row(name, "music", src, files=files, size=each * tracks, year=year or None)
    for i in range(6):
        name = f"VA - Now Thats What I Call Music {80 + i} (20{10 + i}) 2CD [MP3@320]"
        files = "|".join(f"{name}/CD1/{t + 1:02d}. Artist - Song.mp3:{9 * MB}" for t in range(3))
        row(name, "music", "various artists compilation", files=files, size=40 * 9 * MB, year=2010 + i)


def ebooks() -> None:
    for i, (author, title, year) in enumerate(BOOKS):
        kind = form(i, 4)
        if kind == 0:
            name, ext, src = f"{author} - {title} ({year}) (retail) (epub)", "epub", "library e-book, retail epub"
        elif kind == 1:
            name, ext, src = f"{title} by {author} EPUB", "epub", "e-book by author"
        elif kind == 2:
            name, ext, src = f"{author} - {title}.pdf", "pdf", "single PDF"
            row(name, "ebook", src, size=R.randint(1, 30) * MB, title=title)
            continue
        else:
            name, ext, src = f"{title} - {author} [mobi azw3 epub]", "azw3", "e-book, several formats"
        files = "|".join(f"{name}/{author} - {title}.{e}:{R.randint(1, 5) * MB}" for e in (ext, "mobi", "jpg"))
        row(name, "ebook", src, files=files, size=8 * MB, title=title, year=year if "(" in name else None)
    for i in range(8):
        name = f"{['Python', 'Rust', 'Go', 'Kubernetes', 'SQL', 'Linux', 'Docker', 'React'][i]} Programming Books Collection PDF EPUB"
        files = "|".join(f"{name}/Book {t}.pdf:{12 * MB}" for t in range(3))
        row(name, "ebook", "e-book collection", files=files, size=40 * 12 * MB)
    for i, title in enumerate(["National Geographic USA", "The Economist", "New Scientist", "Wired UK"]):
        name = f"{title} - June 2024"
        row(name, "ebook", "magazine issue PDF", files=f"{name}/{title} - June 2024.pdf:{60 * MB}", size=60 * MB)


def comics() -> None:
    for i, title in enumerate(COMICS):
        n, year = R.randint(1, 120), R.randint(1990, 2024)
        kind = form(i, 3)
        if kind == 0:
            name = f"{title} {n:03d} ({year}) (Digital) (Zone-Empire).cbr"
            row(name, "comic", "DCP digital comic issue", size=R.randint(20, 90) * MB, year=year)
        elif kind == 1:
            name = f"{title} Vol. {n % 12 + 1:02d} ({year}) (digital) (Son of Ultron-Empire)"
            files = f"{name}/{title} Vol. {n % 12 + 1:02d} ({year}) (digital) (Son of Ultron-Empire).cbz:{200 * MB}"
            row(name, "comic", "collected volume", files=files, size=200 * MB, year=year)
        else:
            name = f"{title} #{n} - {n + 11} ({year}-{year + 1}) Complete Comics"
            files = "|".join(f"{name}/{title} {k:03d}.cbz:{40 * MB}" for k in range(n, n + 3))
            row(name, "comic", "run of issues", files=files, size=12 * 40 * MB)
    for i, title in enumerate(["One Piece", "Berserk", "Vagabond", "Dorohedoro", "Blame!", "Pluto"]):
        name = f"{title} v{i + 1:02d} (2019) (Digital) (danke-Empire)"
        files = f"{name}/{title} v{i + 1:02d} (2019) (Digital) (danke-Empire).cbz:{150 * MB}"
        row(name, "comic", "manga volume", files=files, size=150 * MB, year=2019)


def audiobooks() -> None:
    for i, (author, title, year) in enumerate(BOOKS + BOOKS[:6]):
        kind = form(i, 4)
        if kind == 0:
            name = f"{author} - {title} (Unabridged) [Audiobook]"
            files = "|".join(f"{name}/{title} - Part {k:02d}.mp3:{60 * MB}" for k in range(1, 4))
            src = "P2P audiobook, mp3 parts"
        elif kind == 1:
            name = f"{title} - {author} - {year} (Narrated by Ray Porter) [M4B]"
            files = f"{name}/{title}.m4b:{400 * MB}"
            src = "single m4b with narrator"
        elif kind == 2:
            name = f"{author} - {title}.m4b"
            files = ""
            src = "single m4b file"
        else:
            name = f"{author} - {title} [{year}] AudioBook 64kbps"
            files = "|".join(f"{name}/{k:02d}.mp3:{30 * MB}" for k in range(1, 4))
            src = "audiobook, kbps mark"
        row(name, "audiobook", src, files=files, size=450 * MB, title=title)


def software() -> None:
    for i, (app, ver) in enumerate(SOFTWARE):
        kind = form(i, 4)
        if kind == 0:
            name = f"{dotted(app)}.{ver}.x64-GRP"
            files = f"{name}/setup.exe:{R.randint(50, 3000) * MB}|{name}/crack/readme.nfo:2048"
            src = "scene software"
        elif kind == 1:
            name = f"{app} {ver} (x64) Multilingual + Crack"
            files = f"{name}/Setup.exe:{R.randint(50, 3000) * MB}|{name}/Crack.txt:2048"
            src = "P2P software"
        elif kind == 2:
            name = f"{app} {ver} macOS"
            files = f"{name}/{app}.dmg:{R.randint(50, 3000) * MB}"
            src = "macOS software"
        else:
            name = f"{app} {ver} Portable"
            files = f"{name}/{app}.zip:{R.randint(50, 900) * MB}"
            src = "portable software"
        row(name, "software", src, files=files, size=R.randint(50, 3000) * MB, title=app)
    for distro in DISTROS:
        row(distro, "software", "Linux/BSD distribution image", size=R.randint(600, 6000) * MB)
    for i, pkg in enumerate(["android-studio-2024.1.1.12-linux.tar.gz", "Termux_v0.118.0.apk",
                             "LibreOffice_24.2.4_Win_x86-64.msi", "gimp-2.10.38-x86_64.AppImage"]):
        row(pkg, "software", "single installer file", size=R.randint(20, 900) * MB)


def games() -> None:
    for i, game in enumerate(GAMES):
        kind = form(i, 6)
        if kind == 0:
            name = f"{game} [FitGirl Repack]"
            files = "|".join(f"{name}/fg-{k:02d}.bin:{4 * GB}" for k in range(1, 4)) + f"|{name}/setup.exe:{5 * MB}"
            src = "repack"
        elif kind == 1:
            name = f"{dotted(game)}-RUNE"
            files = f"{name}/rune-{dotted(game).lower()}.iso:{60 * GB}"
            src = "scene PC game ISO"
        elif kind == 2:
            name = f"{game} v1.6.2 GOG"
            files = f"{name}/setup_{game.lower().replace(' ', '_')}_1.6.2.exe:{15 * GB}"
            src = "GOG installer"
        elif kind == 3:
            name = f"{dotted(game)}.Update.v1.2.3-TENOKE"
            files = f"{name}/{dotted(game)}.Update.v1.2.3-TENOKE.iso:{2 * GB}"
            src = "scene game update"
        elif kind == 4:
            name = f"{game} (Switch) NSP + Update"
            files = f"{name}/{game} [0100A3D008C5C000][v0].nsp:{12 * GB}"
            src = "console dump"
        else:
            name = f"{game} - [DODI Repack]"
            files = "|".join(f"{name}/data{k}.doi:{3 * GB}" for k in range(1, 4)) + f"|{name}/Setup.exe:{4 * MB}"
            src = "repack"
        row(name, "game", src, files=files, size=30 * GB, title=game)


def xxx() -> None:
    for i in range(40):
        site, who = XXX_SITES[i % len(XXX_SITES)], XXX_NAMES[i % len(XXX_NAMES)]
        yy, mm, dd = R.randint(18, 24), R.randint(1, 12), R.randint(1, 28)
        res = R.choice(["720p", "1080p", "2160p"])
        kind = form(i, 4)
        if kind == 0:
            name = f"{site}.{yy}.{mm:02d}.{dd:02d}.{dotted(who)}.XXX.{res}.MP4-WRB"
            src = "scene adult clip"
        elif kind == 1:
            name = f"[{site}] {who} - Scene Title ({2000 + yy}) {res}"
            src = "P2P adult clip, site in brackets"
        elif kind == 2:
            name = f"{site} - {who} - Scene Title XXX {res}"
            src = "P2P adult clip, XXX mark"
        else:
            name = f"{site}.{yy}.{mm:02d}.{dd:02d}.{dotted(who)}.And.Guest.{res}"
            src = "scene adult clip, site only"
        files = f"{name}/{name}.mp4:{R.randint(300, 4000) * MB}"
        row(name, "xxx", src, files=files, size=R.randint(300, 4000) * MB, res=res)


def hand_written() -> None:
    """Irregular names as people upload them."""
    row("Sherlock Season 1-4 Complete + Specials 1080p BluRay x264", "tv_show", "hand: series box",
        files=f"Sherlock/S01/Sherlock.S01E01.mkv:{2 * GB}", size=40 * GB, title="Sherlock", season=1,
        season_end=4, res="1080p")
    row("Friends.S05E14.The.One.Where.Everybody.Finds.Out.480p.DVDRip.XviD-SAiNTS", "tv_show", "hand: DVD rip",
        size=350 * MB, title="Friends", season=5, episode=14, res="480p")
    row("The.Daily.Show.2024.06.12.Guest.720p.WEB.h264-EDITH", "tv_show", "hand: daily show", size=600 * MB,
        title="The Daily Show", year=2024, res="720p")
    row("Planet Earth II (2016) 2160p UHD BluRay x265 HDR - 6 Episodes", "tv_show", "hand: documentary series",
        files="Planet Earth II/Planet Earth II S01E01 Islands.mkv:8000000000", size=48 * GB, title="Planet Earth II",
        year=2016, res="2160p")
    row("Game.of.Thrones.S08E06.The.Iron.Throne.2160p.AMZN.WEB-DL.DDP5.1.HDR.HEVC-NTb", "tv_show", "hand: finale",
        size=9 * GB, title="Game of Thrones", season=8, episode=6, res="2160p")
    row("Oppenheimer 2023 IMAX 1080p BluRay DDP5.1 x265 10bit-GalaxyRG265", "movie", "hand: P2P movie with IMAX",
        files=f"Oppenheimer/Oppenheimer.mkv:{4 * GB}", size=4 * GB, title="Oppenheimer", year=2023, res="1080p")
    row("Le Fabuleux Destin d'Amelie Poulain (2001) FRENCH 1080p BluRay x264 AC3-EXTREME", "movie",
        "hand: non-English title", files=f"Amelie/Amelie.mkv:{9 * GB}", size=9 * GB,
        title="Le Fabuleux Destin d'Amelie Poulain", year=2001, res="1080p")
    row("Tenet (2020) [1080p] [BluRay] [5.1] [YTS.MX]", "movie", "hand: YTS", files=f"Tenet/Tenet.mp4:{2 * GB}",
        size=2 * GB, title="Tenet", year=2020, res="1080p")
    row("Metallica - 72 Seasons (2023) [24Bit-96kHz] FLAC [PMEDIA]", "music", "hand: hi-res album, season word",
        files="72 Seasons/01. 72 Seasons.flac:190000000", size=1500 * MB, year=2023)
    row("Taylor Swift - The Tortured Poets Department (2024) Mp3 320kbps [PMEDIA]", "music", "hand: MP3 album",
        files="TTPD/01. Fortnight.mp3:9000000", size=280 * MB, year=2024)
    row("Brandon Sanderson - Mistborn Series (1-7) [Audiobook] [Michael Kramer]", "audiobook",
        "hand: audiobook series", files="Mistborn/Book 1/01.mp3:80000000", size=5 * GB, title="Mistborn Series")
    row("The Hobbit - J.R.R. Tolkien - Read by Andy Serkis (2020)", "audiobook", "hand: read by",
        files="The Hobbit/The Hobbit.m4b:600000000", size=600 * MB, title="The Hobbit")
    row("Microsoft Windows 10 22H2 AIO 16in1 x64 en-US Pre-Activated", "software", "hand: Windows image",
        files=f"Win10/Win10_22H2_AIO.iso:{5 * GB}", size=5 * GB)
    row("Minecraft Java Edition 1.21 Launcher", "game", "hand: game launcher",
        files="Minecraft/Minecraft.exe:12000000|Minecraft/assets.zip:400000000", size=500 * MB, title="Minecraft")
    row("The.Legend.of.Zelda.Tears.of.the.Kingdom.NSP.Switch-VENOM", "game", "hand: console scene",
        files=f"TotK/totk.nsp:{16 * GB}", size=16 * GB, title="The Legend of Zelda Tears of the Kingdom")
    row("Harry Potter Complete Collection (epub, mobi)", "ebook", "hand: collection",
        files="HP/Harry Potter 1.epub:2000000|HP/Harry Potter 1.mobi:2000000", size=40 * MB)
    row("Watchmen (1986-1987) (Complete) (Digital)", "comic", "hand: complete series",
        files="Watchmen/Watchmen 001.cbr:40000000|Watchmen/Watchmen 002.cbr:40000000", size=480 * MB)
    row("Bluey.2018.S03E10.720p.iP.WEB-DL.AAC2.0.H.264-RAWR", "tv_show", "hand: show year in name", size=300 * MB,
        title="Bluey", year=2018, season=3, episode=10, res="720p")
    row("Doctor.Who.2005.S13E02.720p.HDTV.x264-ORGANiC", "tv_show", "hand: show year in name", size=900 * MB,
        title="Doctor Who", year=2005, season=13, episode=2, res="720p")
    row("Beethoven - Complete Symphonies - Karajan 1963 (6CD) [FLAC]", "music", "hand: classical box",
        files="Beethoven/CD1/01. Symphony No. 1.flac:100000000", size=2 * GB, year=1963)


def main(out: str, *, fresh: bool = False) -> None:
    makers = [tv, movies, music, ebooks, comics, audiobooks, software, games, xxx]
    if not fresh:
        makers.append(hand_written)
    for make in makers:
        make()
    seen: Dict[str, int] = {}
    fields = ["name", "files", "total_size", "type", "tags", "title", "year", "season", "season_end", "episode",
              "episode_end", "resolution", "source", "part"]
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fields, delimiter="\t", lineterminator="\n")
        w.writeheader()
        for r in rows:
            seen[r["type"]] = seen.get(r["type"], 0) + 1
            r["part"] = "held" if fresh or seen[r["type"]] % 3 == 0 else "tune"
            if not r["total_size"]:
                r["total_size"] = sum(int(p.rsplit(":", 1)[1]) for p in r["files"].split("|") if p) or MB
            w.writerow(r)
    print(f"{len(rows)} names: " + ", ".join(f"{k} {v}" for k, v in sorted(seen.items())), file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--fresh"]:  # --fresh SEED [OUT]: a second held sample (see the docstring)
        FRESH, R = True, random.Random(int(args[1]))
        main(args[2] if len(args) > 2 else str(Path(__file__).with_name(f"held_{args[1]}.tsv")), fresh=True)
    else:
        main(args[0] if args else str(Path(__file__).with_name("release_names.tsv")))
