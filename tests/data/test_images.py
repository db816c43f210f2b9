import torch

from openafm.data.images.digits import digit_images
from openafm.data.images.emoji import (HELD_OUT_STYLE, TRAIN_STYLES, EmojiStyle, catalog, emoji_images,
                                       render_noto)
from openafm.data.images.icons import caption, icon_images
from openafm.data.images.image_set import concat


def test_catalog_has_every_emoji_with_names_in_several_languages():
    items = catalog()
    assert 1850 < len(items) < 2000 and len({e.key for e in items}) == len(items)
    grinning = next(e for e in items if e.key == "1f600")
    assert grinning.char == "\U0001F600" and grinning.name == "grinning face"
    languages = dict(grinning.names)
    assert languages["es"] == "cara sonriendo" and languages["de"] == "grinsendes gesicht"
    assert grinning.captions[0] == "grinning face" and "grinning" in grinning.captions
    assert sum(len(e.names) >= 14 for e in items) > 0.95 * len(items)


def test_the_held_out_style_is_never_a_training_style():
    assert HELD_OUT_STYLE not in TRAIN_STYLES and set(TRAIN_STYLES) | {HELD_OUT_STYLE} == set(EmojiStyle)


def test_every_style_draws_the_same_emoji_differently():
    sets = {s: emoji_images(s, limit=6) for s in EmojiStyle}
    for style, images in sets.items():
        assert images.images.shape == (6, 3, 64, 64) and images.images.dtype == torch.uint8
        assert images.keys[0] == "1f600" and images.names[0] == "grinning face"
        assert (images.images[:, :, 0, 0] == 255).all()             # white corners: composited on white
        assert images.images.float().std() > 30                       # a drawing, not a blank
    apple, twitter = sets[EmojiStyle.APPLE].images.float(), sets[EmojiStyle.TWITTER].images.float()
    assert (apple - twitter).abs().mean() > 5


def test_noto_font_shapes_zwj_sequences_and_flags_into_one_glyph():
    family = "\U0001F468\u200D\U0001F469\u200D\U0001F467"
    for text in (family, "\U0001F1EA\U0001F1EC", "\U0001F600"):
        glyph = render_noto(text)
        assert glyph is not None and glyph.width < 1.5 * glyph.height


def test_pixels_resize_and_concat():
    a, b = emoji_images(EmojiStyle.APPLE, limit=3), emoji_images(EmojiStyle.GOOGLE, limit=2)
    both = concat([a, b])
    assert len(both) == 5 and both.names[3] == "grinning face"
    x = both.pixels([0, 4], size=112)
    assert x.shape == (2, 3, 112, 112) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    torch.testing.assert_close(both.pixels([1]), both.images[1:2].float() / 255)


def test_icons_are_named_by_their_files():
    assert caption("folder-music-symbolic") == "folder music"
    assert caption("application-exit-symbolic-rtl") == "application exit rtl"
    icons = icon_images(size=32)
    assert len(icons) > 500 and icons.images.shape[1:] == (3, 32, 32)
    i = icons.keys.index("user-trash")
    assert icons.names[i] == "user trash" and icons.captions[i] == ("user trash", "user trash (places)")


def test_digits_are_the_bundled_sklearn_set():
    digits = digit_images(size=16)
    assert len(digits) == 1797 and digits.images.shape == (1797, 3, 16, 16)
    assert sorted(set(digits.keys)) == [str(d) for d in range(10)]
    assert digits.names[0] == "the digit zero" and digits.keys[0] == "0"
    assert digits.images.min() == 0 and digits.images.max() == 255
